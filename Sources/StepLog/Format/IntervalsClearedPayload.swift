/// The `intervalsCleared` payload, `at i64` (8 bytes).
public struct IntervalsClearedPayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<IntervalsClearedPayload, PayloadProblem> {
        guard bytes.count == 8 else { return .failure(.wrongSize(.intervalsCleared, expected: 8, found: bytes.count)) }
        return .success(IntervalsClearedPayload(bytes: bytes))
    }

    public var atMilliseconds: Int64 { Int64(littleEndian: bytes.loadUnaligned(as: Int64.self)) }

    public static func append(atMilliseconds at: Int64, to buffer: WriteBuffer) {
        RecordFrame.append(type: .intervalsCleared, to: buffer) { $0.append(at) }
    }
}
