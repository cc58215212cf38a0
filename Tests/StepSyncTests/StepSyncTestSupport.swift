import Foundation
@testable import StepLog
@testable import StepSync
@_exported import StepTestSupport

/// A provider that wraps another and records the intervals it was asked about
/// (and can request a stop after a number of queries).
final class RecordingProvider: StepDataProvider, @unchecked Sendable {
    let inner: StepDataProvider
    private let lock = NSLock()
    private(set) var aggregateQueries: [(Int64, Int64)] = []
    private(set) var rawQueries: [(Int64, Int64)] = []
    var stopAfterQueries: (Int, StopSignal)?

    init(_ inner: StepDataProvider) { self.inner = inner }

    var sourceIdentity: String { inner.sourceIdentity }
    var deletionFamily: String? { inner.deletionFamily }

    func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions {
        try await inner.deletedSamples(since: anchor, in: store)
    }

    func layeringRange(now: Date) async throws -> DateInterval { try await inner.layeringRange(now: now) }

    private func note(_ interval: DateInterval, raw: Bool) {
        lock.withLock {
            let q = (Milliseconds.from(interval.start), Milliseconds.from(interval.end))
            if raw { rawQueries.append(q) } else { aggregateQueries.append(q) }
            let n = raw ? rawQueries.count : aggregateQueries.count
            if let (limit, stop) = stopAfterQueries, n >= limit { stop.request() }
        }
    }

    func getAggregatedStepCount(for interval: DateInterval) async throws -> Int {
        note(interval, raw: false)
        return try await inner.getAggregatedStepCount(for: interval)
    }

    /// A cheap question like the aggregate, recorded with them.
    func hasSamples(in interval: DateInterval) async throws -> Bool {
        note(interval, raw: false)
        return try await inner.hasSamples(in: interval)
    }

    func getRawStepSamples(for interval: DateInterval) async throws -> [StepSample] {
        note(interval, raw: true)
        return try await inner.getRawStepSamples(for: interval)
    }
}

/// A provider over a fixed list of samples (for exact layering cases).
struct FixedProvider: StepDataProvider {
    var samples: [StepSample]
    var range: DateInterval
    var sourceIdentity: String { "fixed:\(samples.count)" }

    func layeringRange(now: Date) async throws -> DateInterval { range }

    func getAggregatedStepCount(for interval: DateInterval) async throws -> Int {
        try await getRawStepSamples(for: interval).reduce(0) { $0 + $1.count }
    }

    func getRawStepSamples(for interval: DateInterval) async throws -> [StepSample] {
        let a = Milliseconds.from(interval.start), b = Milliseconds.from(interval.end)
        return samples.filter { $0.startMilliseconds >= a && $0.startMilliseconds < b }
            .sorted { ($0.startMilliseconds, $0.id.uuidString) < ($1.startMilliseconds, $1.id.uuidString) }
    }
}

let day: Int64 = 86_400_000
/// 2026-11-21 as days since 1970.
let testEndDay: Int64 = 20_778

func mock(days: Int = 60, seed: UInt64 = 42, perDay: Int? = nil) -> MockStepDataProvider {
    MockStepDataProvider(configuration: MockConfiguration(seed: seed, days: days, endDay: testEndDay, samplesPerDay: perDay))
}

func interval(_ a: Int64, _ b: Int64) -> DateInterval {
    DateInterval(start: Milliseconds.date(a), end: Milliseconds.date(b))
}

/// Asserts the intervals tile [from, to) with no gap and no overlap.
func tiles(_ intervals: [SyncInterval], from: Int64, to: Int64) -> Bool {
    guard let first = intervals.first, first.startMilliseconds == from, intervals.last!.endMilliseconds == to else { return false }
    return zip(intervals, intervals.dropFirst()).allSatisfy { $0.endMilliseconds == $1.startMilliseconds }
}
