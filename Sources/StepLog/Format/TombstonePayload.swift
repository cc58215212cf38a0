/// The `sampleDeleted` payload, `uuid[16] | deletedAt i64` (24 bytes): the
/// codec that writes one, and a view of a checked one.
public struct TombstonePayload {
    public let bytes: UnsafeRawBufferPointer

    /// Bytes a tombstone record takes on disk, frame included.
    public static let frameSize = RecordFrame.size(payload: FormatConstants.tombstonePayloadSize)

    @inline(__always)
    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<TombstonePayload, PayloadProblem> {
        guard bytes.count == FormatConstants.tombstonePayloadSize else {
            return .failure(.wrongSize(.sampleDeleted, expected: FormatConstants.tombstonePayloadSize, found: bytes.count))
        }
        guard !UUIDBytes(loadingFrom: bytes, at: 0).isNil else { return .failure(.nilUUID(.sampleDeleted)) }
        return .success(TombstonePayload(bytes: bytes))
    }

    @inline(__always)
    public var uuid: UUIDBytes { UUIDBytes(loadingFrom: bytes, at: 0) }

    @inline(__always)
    public var deletedAtMilliseconds: Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: 16, as: Int64.self)) }

    /// Appends a framed tombstone record: the hot path of `delete`, stored in
    /// place as `SamplePayload.append` does.
    @inline(__always)
    public static func append(_ id: UUIDBytes, deletedAt: Int64, to buffer: WriteBuffer) {
        RecordFrame.append(.sampleDeleted, payloadSize: FormatConstants.tombstonePayloadSize, to: buffer) { p in
            p.storeBytes(of: id.high.bigEndian, as: UInt64.self)
            p.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
            p.storeBytes(of: deletedAt.littleEndian, toByteOffset: 16, as: Int64.self)
        }
    }
}
