import Foundation
import StepLog

/// Where fetching is, for progress lines.
public struct FetchProgress: Sendable {
    public var intervalsFetched: Int
    public var intervalsTotal: Int
    public var samples: Int
    public var seconds: Double
}

/// What a fetch run did.
public struct FetchSummary: Sendable, Equatable {
    public var intervalsFetched = 0
    public var samples = UpsertSummary()
    public var batches = 0
    public var seconds = 0.0
    /// Time spent inside the store (upsert, sync, interval records).
    public var storeSeconds = 0.0
    /// Time spent waiting for the source.
    public var providerSeconds = 0.0

    public var samplesSeen: Int { samples.total }
}

/// Stage 2a of the seeds (001): for each pending interval in time order, raw
/// samples → upsert into the store in batches of 1,000 → sync → record the
/// interval `fetched`.
///
/// Syncs are pipelined (`StepLogStore.syncInBackground`): batch k+1 is
/// written while the disk makes batch k durable. An interval is recorded
/// fetched only after a sync made all its samples durable (its batch's
/// ticket, or a later one); its status record becomes durable with a later
/// sync. Killed at any
/// point, the next run fetches again from the first interval not recorded
/// fetched, and the upsert makes the repeat write nothing. Batches fill across
/// intervals (most hold a few hundred samples), so a sync covers 1,000 samples.
public final class FetchService {
    public static let batchSize = 1_000

    private let provider: StepDataProvider
    private let store: StepLogStore
    private let stop: StopSignal?
    private let now: () -> Date
    public var onProgress: ((FetchProgress) -> Void)?
    /// Samples the store is known to hold exactly as served (from the
    /// deletion plan's comparison, `SourceDeletions.alreadyStored`): counted
    /// unchanged without an upsert, which would read each stored version back
    /// only to find it equal.
    public var alreadyStored: ((StepSample) -> Bool)?

    public init(provider: StepDataProvider, store: StepLogStore, stop: StopSignal? = nil, now: @escaping () -> Date = Date.init) {
        self.provider = provider
        self.store = store
        self.stop = stop
        self.now = now
    }

    /// Fetches every pending interval. Throws `StoppedByRequest` after the
    /// current batch is durable when a stop is requested.
    @discardableResult
    public func fetchPending() async throws -> FetchSummary {
        let started = Date()
        var summary = FetchSummary()
        let pending = store.intervals(status: .pending)
        var batch: [StepSample] = []
        batch.reserveCapacity(Self.batchSize)
        /// Intervals whose samples are all in `batch` (or already durable).
        var complete: [SyncInterval] = []

        func timed<T>(_ seconds: inout Double, _ body: () throws -> T) rethrows -> T {
            let t = Date()
            defer { seconds += Date().timeIntervalSince(t) }
            return try body()
        }
        /// The batch whose sync runs, and the intervals it completes.
        var syncing: (ticket: DurabilityTicket, complete: [SyncInterval])?

        /// Waits for the running sync and records the intervals it completes
        /// (their records join the next sync).
        func settle() throws {
            guard let (ticket, done) = syncing else { return }
            syncing = nil
            try timed(&summary.storeSeconds) {
                try store.waitUntilDurable(ticket)
                guard !done.isEmpty else { return }
                try store.recordIntervals(done.map { var i = $0; i.status = .fetched; return i })
            }
            summary.intervalsFetched += done.count
            onProgress?(FetchProgress(intervalsFetched: summary.intervalsFetched, intervalsTotal: pending.count,
                                      samples: summary.samplesSeen, seconds: Date().timeIntervalSince(started)))
        }
        /// Writes the batch and starts its sync, then settles the one before.
        func writeBatch() throws {
            if !batch.isEmpty {
                summary.samples += try timed(&summary.storeSeconds) { try store.upsert(batch, fetchedAt: now()) }
                summary.batches += 1
                batch.removeAll(keepingCapacity: true)
            }
            let ticket = try timed(&summary.storeSeconds) { try store.syncInBackground() }
            try settle()
            syncing = (ticket, complete)
            complete.removeAll(keepingCapacity: true)
        }
        /// Everything written durable, every completed interval recorded and synced.
        func finish() throws {
            try writeBatch()
            try settle()
            try timed(&summary.storeSeconds) { try store.sync() }
        }

        for interval in pending {
            if stop?.isRequested == true {
                try finish()
                throw StoppedByRequest(stage: "fetching")
            }
            let t = Date()
            let samples = try await provider.getRawStepSamples(
                for: DateInterval(start: interval.startDate, end: interval.endDate))
            summary.providerSeconds += Date().timeIntervalSince(t)
            var fresh = samples[...]
            if let alreadyStored {
                let kept = samples.filter { !alreadyStored($0) }
                summary.samples.unchanged += samples.count - kept.count
                fresh = kept[...]
            }
            var rest = fresh
            while !rest.isEmpty {
                let room = Self.batchSize - batch.count
                batch.append(contentsOf: rest.prefix(room))
                rest = rest.dropFirst(room)
                if batch.count == Self.batchSize { try writeBatch() }
            }
            complete.append(interval)
        }
        try finish()
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }
}
