/// The `dailyHighScore` payload, `day u32 | steps i64 | recordedAt i64` (20 bytes).
public struct DailyHighScorePayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<DailyHighScorePayload, PayloadProblem> {
        guard bytes.count == 20 else { return .failure(.wrongSize(.dailyHighScore, expected: 20, found: bytes.count)) }
        return .success(DailyHighScorePayload(bytes: bytes))
    }

    /// The day, read alone (liveness asks only for it).
    public var day: UInt32 { UInt32(littleEndian: bytes.loadUnaligned(as: UInt32.self)) }

    public var score: DailyHighScore {
        var r = ByteReader(bytes, offset: 4)
        return DailyHighScore(day: day, steps: r.readInt64()!, recordedAtMilliseconds: r.readInt64()!)
    }

    public static func append(_ score: DailyHighScore, to buffer: WriteBuffer) {
        RecordFrame.append(type: .dailyHighScore, to: buffer) { b in
            b.append(score.day)
            b.append(score.steps)
            b.append(score.recordedAtMilliseconds)
        }
    }
}
