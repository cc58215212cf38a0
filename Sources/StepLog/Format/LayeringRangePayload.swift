/// The `layeringRange` payload, `start i64 | end i64 | sourceFingerprint u64` (24 bytes).
public struct LayeringRangePayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<LayeringRangePayload, PayloadProblem> {
        guard bytes.count == 24 else { return .failure(.wrongSize(.layeringRange, expected: 24, found: bytes.count)) }
        return .success(LayeringRangePayload(bytes: bytes))
    }

    public var range: LayeringRange {
        var r = ByteReader(bytes)
        return LayeringRange(startMilliseconds: r.readInt64()!, endMilliseconds: r.readInt64()!, sourceFingerprint: r.readUInt64()!)
    }

    public static func append(_ range: LayeringRange, to buffer: WriteBuffer) {
        RecordFrame.append(type: .layeringRange, to: buffer) { b in
            b.append(range.startMilliseconds)
            b.append(range.endMilliseconds)
            b.append(range.sourceFingerprint)
        }
    }
}
