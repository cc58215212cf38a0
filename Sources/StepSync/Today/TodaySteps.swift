/// What the repository shows for today.
public struct TodaySteps: Equatable, Sendable {
    /// The local calendar date, as yyyymmdd.
    public var day: UInt32
    public var steps: Int
    public var goal: Int

    public var goalReached: Bool { steps >= goal }
    /// 0…1.
    public var progress: Double { goal > 0 ? min(1, Double(steps) / Double(goal)) : 1 }
    public var stepsRemaining: Int { max(0, goal - steps) }

    /// "2026-11-21".
    public var date: String {
        let d = Int(day)
        return String(format: "%04d-%02d-%02d", d / 10_000, d / 100 % 100, d % 100)
    }
}
