/// The `samplesAcknowledged` payload, `n u32 | uuid[16] × n`: the codec that
/// writes one, and a view of a checked one.
public struct AcknowledgedPayload {
    public let bytes: UnsafeRawBufferPointer
    /// The number of UUIDs.
    public let count: Int

    /// Most UUIDs one record carries (its payload stays under the record limit).
    public static let maxCount = (FormatConstants.maxRecordPayload - 4) / 16

    @inline(__always)
    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<AcknowledgedPayload, PayloadProblem> {
        guard bytes.count >= 4 else { return .failure(.malformed(.samplesAcknowledged, size: bytes.count)) }
        let n = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
        guard bytes.count == 4 + 16 * n else { return .failure(.malformed(.samplesAcknowledged, size: bytes.count)) }
        return .success(AcknowledgedPayload(bytes: bytes, count: n))
    }

    /// UUID `i` (0 ≤ i < count).
    @inline(__always)
    public func uuid(_ i: Int) -> UUIDBytes { UUIDBytes(loadingFrom: bytes, at: 4 + 16 * i) }

    /// Appends a framed record acknowledging `ids` (at most `maxCount`).
    public static func append<C: Collection>(_ ids: C, to buffer: WriteBuffer) where C.Element == UUIDBytes {
        RecordFrame.append(type: .samplesAcknowledged, to: buffer) { b in
            b.append(UInt32(ids.count))
            for id in ids { b.append(id) }
        }
    }
}
