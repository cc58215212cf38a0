import StepLog

/// The digests of what a store holds, per UTC day of `startDate`, computed as
/// the server computes its own (docs/RECONCILE.md): for each day, the samples
/// the store holds acknowledged (live, synced), and every live sample it
/// would have the server hold (live, not rejected: a rejected version is not
/// sent). One pass over the store's samples.
public struct StoreDigests: Sendable {
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

    /// The digests of `store` as it is.
    public static func of(_ store: StepLogStore) throws -> StoreDigests {
        let rejected = try Set(store.rejectedSamples().map(\.sample.id))
        var digests = StoreDigests()
        var hasher = SampleDigest()
        try store.forEachSample { stored in
            guard !rejected.contains(stored.id) else { return }
            let hash = hasher.hash(stored.sample)
            let day = SampleDigest.day(stored.sample)
            digests.days[day, default: Day()].live.add(hash)
            if stored.isSynced { digests.days[day, default: Day()].acknowledged.add(hash) }
        }
        return digests
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
