import StepLog

/// The digests of what a store holds, per UTC day of `startDate`, computed as
/// the server computes its own (docs/RECONCILE.md): for each day, the samples
/// the store holds acknowledged (live, synced), and every live sample it
/// would have the server hold (live, not rejected: a rejected version is not
/// sent). One pass over the store's samples.
public struct StoreDigests: Equatable, Sendable {
    public struct Day: Hashable, Sendable {
        /// Live samples whose current version is acknowledged.
        public var acknowledged = SamplesDigest()
        /// Live samples that are not rejected (acknowledged or waiting for upload).
        public var live = SamplesDigest()
    }

    public var days: [Int64: Day] = [:]

    /// Every acknowledged sample: what the server's digest for this store's
    /// uploader must equal.
    public var acknowledged: SamplesDigest {
        var total = SamplesDigest()
        for day in days.values { total.add(day.acknowledged) }
        return total
    }

    public init(days: [Int64: Day] = [:]) { self.days = days }

    /// The digest of the samples `store` holds acknowledged (live, synced,
    /// not rejected): what the server's digest of this store's uploader must
    /// equal. The check of every upload: one pass over the current versions
    /// on `parts` threads, hashing only the acknowledged ones, keeping one
    /// total; the days (`of`) are computed only when the server differs.
    public static func acknowledged(of store: StepLogStore, parts: Int = 2) throws -> SamplesDigest {
        let rejected = try Set(store.rejectedSamples().map { UUIDBytes($0.sample.id) })
        let totals = RunTotals(parts)
        try store.forEachSampleVersion(parts: parts) { run, version, synced in
            guard synced, rejected.isEmpty || !rejected.contains(version.uuid) else { return }
            totals.add(SampleDigest.hash(version), run: run)
        }
        return totals.sum
    }

    /// The digests of `store` as it is, per day: its current versions read
    /// in place on `parts` threads (each keeps its own days; digests add up).
    public static func of(_ store: StepLogStore, parts: Int = 2) throws -> StoreDigests {
        let rejected = try Set(store.rejectedSamples().map { UUIDBytes($0.sample.id) })
        let runs = Runs(parts)
        try store.forEachSampleVersion(parts: parts) { run, version, synced in
            guard rejected.isEmpty || !rejected.contains(version.uuid) else { return }
            runs.add(run, version, synced: synced)
        }
        var digests = StoreDigests()
        for days in runs.days {
            for (day, digest) in days {
                digests.days[day, default: Day()].live.add(digest.live)
                digests.days[day, default: Day()].acknowledged.add(digest.acknowledged)
            }
        }
        return digests
    }

    /// Each run's days: a run touches only its own (no lock).
    private final class Runs: @unchecked Sendable {
        var days: [[Int64: Day]]

        init(_ parts: Int) {
            days = Array(repeating: [:], count: max(1, parts))
        }

        func add(_ run: Int, _ version: SamplePayload, synced: Bool) {
            let hash = SampleDigest.hash(version)
            let day = SampleDigest.day(version)
            days[run][day, default: Day()].live.add(hash)
            if synced { days[run][day, default: Day()].acknowledged.add(hash) }
        }
    }

    /// Each run's total, on a cache line of its own: threads adding to
    /// neighbouring totals would pass one line between their cores at every
    /// sample.
    private final class RunTotals: @unchecked Sendable {
        private static let spacing = max(1, 128 / MemoryLayout<SamplesDigest>.stride)
        private let totals: UnsafeMutablePointer<SamplesDigest>
        private let parts: Int

        init(_ parts: Int) {
            self.parts = max(1, parts)
            totals = .allocate(capacity: self.parts * Self.spacing)
            totals.initialize(repeating: SamplesDigest(), count: self.parts * Self.spacing)
        }

        deinit { totals.deallocate() }

        func add(_ hash: UInt64, run: Int) { totals[run * Self.spacing].add(hash) }

        var sum: SamplesDigest {
            var sum = SamplesDigest()
            for run in 0..<parts { sum.add(totals[run * Self.spacing]) }
            return sum
        }
    }

    /// The live samples of the store that start on one of `days`, by day,
    /// each with whether its current version is rejected.
    public static func samples(of store: StepLogStore, on days: Set<Int64>) throws -> [Int64: [(sample: StoredSample, rejected: Bool)]] {
        guard !days.isEmpty else { return [:] }
        let rejected = try Set(store.rejectedSamples().map(\.sample.id))
        var found: [Int64: [(sample: StoredSample, rejected: Bool)]] = [:]
        try store.forEachSample { stored in
            let day = SampleDigest.day(stored.sample)
            guard days.contains(day) else { return }
            found[day, default: []].append((stored, rejected.contains(stored.id)))
        }
        return found
    }
}
