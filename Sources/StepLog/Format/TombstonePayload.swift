/// The `sampleDeleted` payload, `uuid[16] | deletedAt i64` (24 bytes).
public enum TombstonePayload {
    @inline(__always)
    public static func isWellFormed(_ payload: UnsafeRawBufferPointer) -> Bool {
        payload.count == FormatConstants.tombstonePayloadSize && !uuid(payload).isNil
    }

    @inline(__always)
    public static func uuid(_ payload: UnsafeRawBufferPointer) -> UUIDBytes { UUIDBytes(loadingFrom: payload, at: 0) }

    @inline(__always)
    public static func deletedAtMilliseconds(_ payload: UnsafeRawBufferPointer) -> Int64 {
        Int64(littleEndian: payload.loadUnaligned(fromByteOffset: 16, as: Int64.self))
    }

    public static func problem(_ payload: UnsafeRawBufferPointer) -> PayloadProblem {
        if payload.count == FormatConstants.tombstonePayloadSize { return PayloadProblem("sample-deleted record holds the nil UUID") }
        return PayloadProblem("sample-deleted payload must be \(FormatConstants.tombstonePayloadSize) bytes, found \(payload.count)")
    }

    /// Appends a framed tombstone record: the hot path of `delete`, stored in
    /// place like `SamplePayload.appendRecord`.
    @inline(__always)
    public static func appendRecord(_ id: UUIDBytes, deletedAt: Int64, to buffer: WriteBuffer) {
        let payloadSize = FormatConstants.tombstonePayloadSize
        let size = FormatConstants.recordHeaderSize + payloadSize
        buffer.reserve(size)
        let frame = buffer.storage + buffer.count
        let p = frame + FormatConstants.recordHeaderSize
        frame.storeBytes(of: UInt32(payloadSize).littleEndian, as: UInt32.self)
        frame.storeBytes(of: RecordType.sampleDeleted.rawValue, toByteOffset: 4, as: UInt8.self)
        p.storeBytes(of: id.high.bigEndian, as: UInt64.self)
        p.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        p.storeBytes(of: deletedAt.littleEndian, toByteOffset: 16, as: Int64.self)
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(start: frame + 4, count: 1))
        crc = CRC32C.extend(crc, UnsafeRawBufferPointer(start: p, count: payloadSize))
        frame.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: 5, as: UInt32.self)
        buffer.count += size
    }
}
