import Foundation
import StepLog

/// The built-in source: deterministic mock step data with the seeds'
/// characteristics (see `MockDay`), so a new user can run the whole pipeline
/// with no data of their own.
///
/// Unlike the seeds' mock, samples have stable UUIDs derived from the seed, the
/// day and the sample's index, and the aggregate of any interval is exactly
/// the sum of the raw samples starting in it. Two sources, an iPhone and an
/// Apple Watch worn on some days (`MockWatchStream`), overlap the way real
/// pairs do, so merged daily totals differ from raw sums (docs/TOTALS.md).
/// Days are generated on demand and the last few are cached; each day's total
/// is computed once at start (from a few draws without the Watch), so
/// aggregates over years cost a prefix-sum lookup.
public final class MockStepDataProvider: StepDataProvider, @unchecked Sendable {
    public let configuration: MockConfiguration
    private let lock = NSLock()
    private var cache: [Int64: MockDay] = [:]
    private var cacheOrder: [Int64] = []
    private static let cacheDays = 16
    /// dailyPrefix[i] = steps of the first i data days.
    private let dailyPrefix: [Int64]

    public init(configuration: MockConfiguration) {
        self.configuration = configuration
        var prefix: [Int64] = [0]
        prefix.reserveCapacity(configuration.days + 1)
        for day in configuration.firstDay..<configuration.endDay {
            prefix.append(prefix.last! + MockDay.total(configuration, day: day))
        }
        dailyPrefix = prefix
    }

    public var sourceIdentity: String { configuration.description }

    /// Total steps in the mock's whole range.
    public var totalSteps: Int64 { dailyPrefix.last! }

    private func day(_ d: Int64) -> MockDay {
        lock.lock()
        defer { lock.unlock() }
        if let cached = cache[d] { return cached }
        let made = MockDay(configuration, day: d)
        cache[d] = made
        cacheOrder.append(d)
        if cacheOrder.count > Self.cacheDays { cache.removeValue(forKey: cacheOrder.removeFirst()) }
        return made
    }

    /// Clamps [start, end) in ms to the days that have data.
    private func clamp(_ interval: DateInterval) -> (Int64, Int64)? {
        let from = max(Milliseconds.from(interval.start), configuration.firstDay * MockDay.millisecondsPerDay)
        let to = min(Milliseconds.from(interval.end), configuration.endDay * MockDay.millisecondsPerDay)
        return from < to ? (from, to) : nil
    }

    private func simulateLatency(_ factor: Int) async throws {
        if configuration.latencyMilliseconds > 0 {
            try await Task.sleep(nanoseconds: UInt64(configuration.latencyMilliseconds * factor) * 1_000_000)
        }
    }

    public func getAggregatedStepCount(for interval: DateInterval) async throws -> Int {
        try await simulateLatency(1)
        return Int(steps(in: interval))
    }

    /// Every mock sample counts at least 10 steps, so the aggregate answers:
    /// one query, as HealthKit would take.
    public func hasSamples(in interval: DateInterval) async throws -> Bool {
        try await simulateLatency(1)
        return steps(in: interval) > 0
    }

    /// The aggregate, without simulated latency.
    public func steps(in interval: DateInterval) -> Int64 {
        guard let (from, to) = clamp(interval) else { return 0 }
        let ms = MockDay.millisecondsPerDay
        let firstDay = ISO8601.floorDivide(from, ms).0
        let lastDay = ISO8601.floorDivide(to - 1, ms).0
        func partial(_ d: Int64, _ a: Int64, _ b: Int64) -> Int64 {
            if a == d * ms && b == (d + 1) * ms { return wholeDay(d) }
            return day(d).steps(from: a, to: b)
        }
        if firstDay == lastDay { return partial(firstDay, from, to) }
        var total = partial(firstDay, from, (firstDay + 1) * ms) + partial(lastDay, lastDay * ms, to)
        if lastDay > firstDay + 1 {
            let base = configuration.firstDay
            total += dailyPrefix[Int(lastDay - base)] - dailyPrefix[Int(firstDay + 1 - base)]
        }
        return total
    }

    private func wholeDay(_ d: Int64) -> Int64 {
        let i = Int(d - configuration.firstDay)
        return dailyPrefix[i + 1] - dailyPrefix[i]
    }

    public func getRawStepSamples(for interval: DateInterval) async throws -> [StepSample] {
        try await simulateLatency(2)
        guard let (from, to) = clamp(interval) else { return [] }
        let ms = MockDay.millisecondsPerDay
        var result: [StepSample] = []
        var d = ISO8601.floorDivide(from, ms).0
        let lastDay = ISO8601.floorDivide(to - 1, ms).0
        while d <= lastDay {
            result.append(contentsOf: day(d).samples(from: from, to: to))
            d += 1
        }
        return result
    }
}
