import Foundation
import StepLog

/// Seed 004's `StepRepository`: one source of truth for today's step count,
/// which never decreases within a local calendar day.
///
/// Inputs: A, a live and noisy reading (the pedometer); B, the verified total
/// for today from the provider's aggregate query; C, the high score persisted
/// in the store. Shown: max(A, B, C). When it increases, the new high score is
/// written to the store and synced before anyone is told (it survives a
/// restart or a crash; compaction keeps the latest per day), observers are
/// notified, and two throttled actions get the value: a widget refresh at most
/// every 15 s and a leaderboard sync at most every 30 s, each with a trailing
/// call so the last value always goes out (`tick` delivers due calls).
///
/// The day is the local date in `timeZone()` at `clock.now()`; when it
/// changes (midnight, a DST day, a time-zone change) A and B start again from
/// zero and C is that day's persisted high score.
public final class StepRepository {
    public static let defaultGoal = 10_000

    private let store: StepLogStore
    private let clock: TodayClock
    private let timeZone: () -> TimeZone
    private let widget: Throttle
    private let leaderboard: Throttle
    private var observers: [(TodaySteps) -> Void] = []
    private var pedometer = 0
    private var verified = 0
    public private(set) var today: TodaySteps

    public init(store: StepLogStore, goal: Int = defaultGoal, clock: TodayClock = SystemClock(),
                timeZone: @escaping () -> TimeZone = { TimeZone.current },
                widgetRefresh: @escaping (Int) -> Void = { _ in }, leaderboardSync: @escaping (Int) -> Void = { _ in },
                widgetInterval: Double = 15, leaderboardInterval: Double = 30) {
        self.store = store
        self.clock = clock
        self.timeZone = timeZone
        widget = Throttle(interval: widgetInterval, action: widgetRefresh)
        leaderboard = Throttle(interval: leaderboardInterval, action: leaderboardSync)
        let day = Self.dayKey(clock.now(), timeZone())
        today = TodaySteps(day: day, steps: Int(store.highScore(day: day)?.steps ?? 0), goal: goal)
    }

    /// Calls `observer` with every new value (increase or day change).
    public func observe(_ observer: @escaping (TodaySteps) -> Void) { observers.append(observer) }

    /// A: a live pedometer reading for today.
    @discardableResult
    public func update(pedometer steps: Int) throws -> TodaySteps {
        try rollDayIfNeeded()
        pedometer = max(0, steps)
        return try ratchet()
    }

    /// B: the verified total for today.
    @discardableResult
    public func update(verified steps: Int) throws -> TodaySteps {
        try rollDayIfNeeded()
        verified = max(0, steps)
        return try ratchet()
    }

    /// B from a provider: today's merged total so far, overlapping sources
    /// counted once (`MergedToday`, docs/TOTALS.md).
    @discardableResult
    public func refreshVerified(from provider: StepDataProvider, priority: SourcePriority = .default) async throws -> TodaySteps {
        try rollDayIfNeeded()
        let steps = try await MergedToday.steps(from: provider, now: clock.now(), timeZone: timeZone(), priority: priority)
        verified = max(0, steps.merged)
        return try ratchet()
    }

    /// Handles the passing of time: a day change, and throttled calls now due.
    public func tick() throws {
        try rollDayIfNeeded()
        let now = clock.now()
        widget.tick(now: now)
        leaderboard.tick(now: now)
    }

    /// The earliest time a throttled call is due (a scheduler's next wake-up).
    public var nextDue: Date? { [widget.nextDue, leaderboard.nextDue].compactMap { $0 }.min() }

    private func ratchet() throws -> TodaySteps {
        let candidate = max(pedometer, verified, today.steps)
        guard candidate > today.steps else { return today }
        // Durable before anyone is told: a crash never shows a smaller number after.
        try store.recordHighScore(DailyHighScore(day: today.day, steps: Int64(candidate),
                                                 recordedAtMilliseconds: Milliseconds.from(clock.now())))
        try store.sync()
        today.steps = candidate
        publish()
        let now = clock.now()
        widget.submit(candidate, now: now)
        leaderboard.submit(candidate, now: now)
        return today
    }

    private func rollDayIfNeeded() throws {
        let day = Self.dayKey(clock.now(), timeZone())
        guard day != today.day else { return }
        pedometer = 0
        verified = 0
        today = TodaySteps(day: day, steps: Int(store.highScore(day: day)?.steps ?? 0), goal: today.goal)
        publish()
        let now = clock.now()
        widget.submit(today.steps, now: now)
        leaderboard.submit(today.steps, now: now)
    }

    private func publish() { for o in observers { o(today) } }

    /// The local date of `date` in `zone`, as yyyymmdd.
    public static func dayKey(_ date: Date, _ zone: TimeZone) -> UInt32 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let c = calendar.dateComponents([.year, .month, .day], from: date)
        return UInt32(c.year! * 10_000 + c.month! * 100 + c.day!)
    }
}
