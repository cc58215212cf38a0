/// The highest step count displayed for one local calendar day (seed 004's
/// "cached high score", variable C). The day is the local date it was seen on.
public struct DailyHighScore: Hashable, Sendable {
    /// The local date as the number yyyymmdd (e.g. 20261121).
    public var day: UInt32
    public var steps: Int64
    public var recordedAtMilliseconds: Int64

    public init(day: UInt32, steps: Int64, recordedAtMilliseconds: Int64) {
        self.day = day
        self.steps = steps
        self.recordedAtMilliseconds = recordedAtMilliseconds
    }
}
