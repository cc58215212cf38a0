/// The `samplesAcknowledged` payload, `n u32 | uuid[16] × n`: the one decoder
/// of it (replay, snapshot builds and `LogRecord` all read it here).
public enum AcknowledgedPayload {
    /// Most UUIDs one record carries (its payload stays under the record limit).
    public static let maxCount = (FormatConstants.maxRecordPayload - 4) / 16

    /// The number of UUIDs, or nil when the payload's size does not match it.
    @inline(__always)
    public static func count(_ payload: UnsafeRawBufferPointer) -> Int? {
        guard payload.count >= 4 else { return nil }
        let n = Int(UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
        return payload.count == 4 + 16 * n ? n : nil
    }

    /// UUID `i` (0 ≤ i < count).
    @inline(__always)
    public static func uuid(_ payload: UnsafeRawBufferPointer, _ i: Int) -> UUIDBytes {
        UUIDBytes(loadingFrom: payload, at: 4 + 16 * i)
    }

    public static func problem(_ payload: UnsafeRawBufferPointer) -> PayloadProblem {
        PayloadProblem("samples-acknowledged payload of \(payload.count) bytes does not match its count")
    }

    /// Appends a framed record acknowledging `ids` (at most `maxCount`).
    public static func appendRecord<C: Collection>(_ ids: C, to buffer: WriteBuffer) where C.Element == UUIDBytes {
        RecordFrame.append(type: .samplesAcknowledged, to: buffer) { b in
            b.append(UInt32(ids.count))
            for id in ids { b.append(id) }
        }
    }
}
