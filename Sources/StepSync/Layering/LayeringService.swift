import Foundation
import StepLog

/// Stage 1 of the seeds (000): finds where step data is with cheap aggregate
/// queries, by recursively halving the data range at its time midpoint until
/// each interval holds at most 10,000 steps, and records every leaf in the
/// store: `empty` when no sample starts in it, otherwise `pending`. (A count of
/// 0 alone does not make a leaf empty: samples of 0 steps, or of fractions
/// that round to none, are fetched like any other.)
///
/// Resumable: the data range (the tree's root) is recorded before any leaf,
/// and leaves are recorded (and synced in groups) as they are found. A later
/// run walks the same tree: a node whose whole range is already covered by
/// recorded leaves is skipped without a query, a partly covered node is split
/// without a query, so nothing recorded is asked again. Leaves therefore tile
/// the range exactly as a clean run's would.
///
/// What a run resumes must have been drawn by the same rules from the same
/// source: the layering ranges carry a fingerprint of both (`fingerprint(of:)`),
/// and a store whose ranges carry another is layered again from nothing.
public final class LayeringService {
    /// The rules that drew a tree, part of its fingerprint. Version 2 (lead-zero,
    /// 2026-11-28): a leaf is empty when no sample starts in it; under version 1
    /// a leaf whose aggregate was 0 was recorded empty, so a sample of 0 steps
    /// alone in it (or at either end of the data) was never fetched, and
    /// resuming such a tree would keep it so.
    static let rules = "layering rules 2"

    /// The fingerprint of the tree `provider`'s data gets under these rules.
    public static func fingerprint(of provider: StepDataProvider) -> UInt64 {
        LayeringRange.fingerprint(rules + "\n" + provider.sourceIdentity)
    }

    public static let maxStepsPerInterval = 10_000
    /// The seeds' binary searches for the first and last data stop within a day.
    public static let searchResolution: Int64 = 86_400_000
    /// Leaves are written and synced every `leavesPerSync` leaves or every
    /// `secondsPerSync`, whichever comes first: with a slow source (HealthKit
    /// answers in tens of milliseconds) a crash loses at most a fraction of a
    /// second of queries; with a fast one, syncs stay rare.
    static let leavesPerSync = 512
    static let secondsPerSync = 0.25
    private var lastSync = Date()

    private let provider: StepDataProvider
    private let store: StepLogStore
    private let stop: StopSignal?
    private let now: () -> Date
    public var onProgress: ((LayeringProgress) -> Void)?

    private var fingerprint: UInt64 = 0
    private var queries = 0
    private var found = 0
    private var buffered: [SyncInterval] = []
    private var recorded = 0
    /// Leaves recorded before this run, sorted, with prefix sums of their lengths.
    private var existingStarts: [Int64] = []
    private var existingLengthPrefix: [Int64] = [0]
    private var rangeStart: Int64 = 0
    private var rangeLength: Int64 = 1

    public init(provider: StepDataProvider, store: StepLogStore, stop: StopSignal? = nil, now: @escaping () -> Date = Date.init) {
        self.provider = provider
        self.store = store
        self.stop = stop
        self.now = now
    }

    /// Deletes every interval and layering range (the seeds' `clearAllIntervals`), durably.
    public func clearAllIntervals() throws {
        try store.clearIntervals(at: now())
        try store.sync()
    }

    /// Layers the source's data range, resuming whatever an earlier run of the
    /// same source recorded. Throws `StoppedByRequest` after recording what it
    /// found when a stop is requested.
    @discardableResult
    public func performLayering() async throws -> LayeringSummary {
        let started = Date()
        var summary = LayeringSummary()
        fingerprint = Self.fingerprint(of: provider)
        if store.layeringRanges.contains(where: { $0.sourceFingerprint != fingerprint }) {
            try clearAllIntervals()
            summary.sourceChanged = true
        }
        let existing = store.intervals()
        summary.intervalsKept = existing.count
        found = existing.count
        existingStarts = existing.map(\.startMilliseconds)
        existingLengthPrefix = [0]
        existingLengthPrefix.reserveCapacity(existing.count + 1)
        for interval in existing {
            existingLengthPrefix.append(existingLengthPrefix.last! + interval.endMilliseconds - interval.startMilliseconds)
        }

        // With no data at all the root is recorded as one empty leaf: nothing to divide.
        if store.layeringRanges.isEmpty, try await recordRoot() == false {
            return finish(&summary, started)
        }
        for range in store.layeringRanges {
            rangeStart = range.startMilliseconds
            rangeLength = max(1, range.endMilliseconds - range.startMilliseconds)
            try await divide(range.startMilliseconds, range.endMilliseconds)
        }
        try flush()
        return finish(&summary, started)
    }

    private func finish(_ summary: inout LayeringSummary, _ started: Date) -> LayeringSummary {
        summary.intervalsRecorded = recorded
        summary.queries = queries
        summary.seconds = Date().timeIntervalSince(started)
        report("done", fraction: 1)
        return summary
    }

    // MARK: The root

    /// Finds the data range and records it; returns false when there is no data
    /// at all (then the whole search range is recorded as one empty interval).
    private func recordRoot() async throws -> Bool {
        let window = try await provider.layeringRange(now: now())
        let lo = Milliseconds.from(window.start), hi = Milliseconds.from(window.end)
        if try await !holdsData(lo, hi) {
            try store.recordLayeringRange(LayeringRange(startMilliseconds: lo, endMilliseconds: hi, sourceFingerprint: fingerprint))
            try record(lo, hi, steps: 0, empty: true)
            try flush()
            return false
        }
        report("searching for the first day with data", fraction: 0)
        let first = try await findDataStart(lo, hi)
        report("searching for the last day with data", fraction: 0)
        let last = try await findDataEnd(lo, hi)
        try store.recordLayeringRange(LayeringRange(startMilliseconds: first, endMilliseconds: last, sourceFingerprint: fingerprint))
        try store.sync()
        return true
    }

    /// The seeds' `findDataStart`: the earliest `low` such that [lo, low) has no
    /// data, to within a day.
    private func findDataStart(_ lo: Int64, _ hi: Int64) async throws -> Int64 {
        var low = lo, high = hi
        while high - low > Self.searchResolution {
            let mid = low + (high - low) / 2
            if try await holdsData(low, mid) { high = mid } else { low = mid }
        }
        return low
    }

    /// The seeds' `findDataEnd`: the latest `high` such that [high, hi) has no data.
    private func findDataEnd(_ lo: Int64, _ hi: Int64) async throws -> Int64 {
        var low = lo, high = hi
        while high - low > Self.searchResolution {
            let mid = low + (high - low) / 2
            if try await holdsData(mid, high) { low = mid } else { high = mid }
        }
        return high
    }

    // MARK: The tree

    private func divide(_ a: Int64, _ b: Int64) async throws {
        if stop?.isRequested == true {
            try flush()
            throw StoppedByRequest(stage: "layering")
        }
        let covered = coverage(a, b)
        if covered >= b - a { return }
        let splittable = b - a >= 2
        if covered == 0 || !splittable {
            let steps = try await count(a, b)
            if steps <= Self.maxStepsPerInterval || !splittable {
                if covered == 0 {
                    let empty = steps == 0 ? try await !hasSamples(a, b) : false
                    try record(a, b, steps: steps, empty: empty)
                }
                return
            }
        }
        let mid = a + (b - a) / 2
        try await divide(a, mid)
        try await divide(mid, b)
    }

    /// Milliseconds of [a, b) covered by leaves recorded before this run. Leaves
    /// are nodes of the same tree, so each lies wholly inside or outside.
    private func coverage(_ a: Int64, _ b: Int64) -> Int64 {
        guard !existingStarts.isEmpty else { return 0 }
        return existingLengthPrefix[lowerBound(b)] - existingLengthPrefix[lowerBound(a)]
    }

    private func lowerBound(_ ms: Int64) -> Int {
        var lo = 0, hi = existingStarts.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if existingStarts[mid] < ms { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    private func count(_ a: Int64, _ b: Int64) async throws -> Int {
        queries += 1
        return try await provider.getAggregatedStepCount(for: DateInterval(start: Milliseconds.date(a), end: Milliseconds.date(b)))
    }

    private func hasSamples(_ a: Int64, _ b: Int64) async throws -> Bool {
        queries += 1
        return try await provider.hasSamples(in: DateInterval(start: Milliseconds.date(a), end: Milliseconds.date(b)))
    }

    /// Whether any sample starts in [a, b): the aggregate, and only where it
    /// is 0 the question itself.
    private func holdsData(_ a: Int64, _ b: Int64) async throws -> Bool {
        if try await count(a, b) > 0 { return true }
        return try await hasSamples(a, b)
    }

    /// Buffers a leaf; every `leavesPerSync` leaves are written and synced.
    private func record(_ a: Int64, _ b: Int64, steps: Int, empty: Bool) throws {
        let id = DerivedUUID.make(DerivedUUID.intervalDomain, fingerprint, UInt64(bitPattern: a), UInt64(bitPattern: b))
        buffered.append(SyncInterval(id: id, startMilliseconds: a, endMilliseconds: b, stepCount: Int64(steps),
                                     status: empty ? .empty : .pending))
        found += 1
        if buffered.count >= Self.leavesPerSync || Date().timeIntervalSince(lastSync) >= Self.secondsPerSync { try flush() }
        report("layering", fraction: Double(b - rangeStart) / Double(rangeLength))
    }

    /// Records buffered leaves and makes them durable.
    private func flush() throws {
        guard !buffered.isEmpty else { return }
        try store.recordIntervals(buffered)
        try store.sync()
        lastSync = Date()
        recorded += buffered.count
        buffered.removeAll(keepingCapacity: true)
    }

    private func report(_ status: String, fraction: Double) {
        onProgress?(LayeringProgress(intervalsFound: found, queries: queries, fractionDone: min(1, max(0, fraction)), status: status))
    }
}
