import Foundation
import StepLog

/// Where an upload is, for progress lines.
public struct UploadProgress: Sendable {
    public var batches: Int
    public var samplesSynced: Int
    public var samplesTotal: Int
    public var deletionsAcknowledged: Int
    public var deletionsTotal: Int
    public var retries: Int
    public var seconds: Double
}

/// What an upload run did.
public struct UploadSummary: Sendable, Equatable {
    /// Requests acknowledged: `POST /steps` and `POST /steps/deletions`.
    public var batches = 0
    /// Samples acknowledged and marked synced.
    public var samplesSynced = 0
    /// What the server said it newly wrote (less than sent when it already had some).
    public var samplesSavedByServer = 0
    /// `POST /steps/deletions` requests acknowledged.
    public var deletionBatches = 0
    /// Deletions acknowledged and marked so (their tombstones are done).
    public var deletionsAcknowledged = 0
    /// What the server said was live and is now deleted (less than sent when
    /// it never had some, or a retried request had deleted them already).
    public var deletionsAppliedByServer = 0
    /// Samples the server refused for a reason of their own in this run,
    /// now recorded rejected in the store (the rest of their batches arrived).
    public var samplesRejected = 0
    /// The first few of those, with the server's reasons.
    public var firstRejections: [SampleRejection] = []
    public var retries = 0
    public var intervalsSynced = 0
    public var seconds = 0.0
}

/// Stage 2b of the seeds (001/002): unsynced samples, 1,000 at a time in log
/// order → `POST /steps` → on 200, mark them synced and sync the store →
/// repeat until none remain; then the pending deletions the same way,
/// 1,000 ids at a time → `POST /steps/deletions` → on 200, mark them
/// acknowledged (their tombstones leave the store), with as many requests in
/// flight and acknowledged in the same order.
///
/// Additions and deletions of one run never share a UUID: the store holds
/// one current state per UUID, a live version or a tombstone, and the upload
/// holds the store's writer lock, so nothing changes it meanwhile. Whatever
/// the store's last word on a UUID is (a deletion after a re-add, a re-add
/// after a deletion) is what the server ends with; a revived sample's old
/// tombstone is no longer pending and is never sent.
///
/// Up to `inFlight` batches are out at once (4 by default: the server's work
/// on one overlaps its database's on others), and they are acknowledged in
/// the order sent: a batch is marked synced, durably, only after the server
/// acknowledged it and every batch before it was marked. So a crash can only
/// cause the batches in flight (which the server may have taken) to be sent
/// again, which the server's idempotency absorbs, and never skips one. Connection
/// errors, timeouts and 5xx are retried with `RetryPolicy`; a 4xx stops with
/// the server's message. Fetched intervals become `synced` once every sample
/// written before their fetched record is synced (the upload goes in log
/// order, so this advances as batches are acknowledged).
///
/// A 400 that names a sample (`samples[3].count: …`) does not stop the
/// upload: the batch is split until the refused samples are found
/// (`settleRefused`), the others are sent and marked synced, and the refused
/// ones are recorded rejected with the server's reason — kept in the store,
/// not sent again until their content changes.
public final class APISyncService {
    public static let defaultBatchSize = 1_000
    /// Requests kept in flight. On PostgreSQL more overlap the server's CPU with the database's;
    /// on the embedded backend the number matters little (figures: PERFORMANCE.md).
    public static let defaultInFlight = 4

    let store: StepLogStore
    let client: APIClient
    let retry: RetryPolicy
    private let batchSize: Int
    private let inFlight: Int
    private let stop: StopSignal?
    let sleep: @Sendable (Double) async throws -> Void
    public var onProgress: ((UploadProgress) -> Void)?
    /// Called before each retry with the attempt number, the wait and the
    /// error (from the task posting the batch).
    public var onRetry: (@Sendable (Int, Double, APIError) -> Void)?

    public init(store: StepLogStore, client: APIClient, retry: RetryPolicy = RetryPolicy(), batchSize: Int = defaultBatchSize,
                inFlight: Int = defaultInFlight, stop: StopSignal? = nil,
                sleep: @escaping @Sendable (Double) async throws -> Void = { try await Task.sleep(nanoseconds: UInt64($0 * 1e9)) }) {
        self.store = store
        self.client = client
        self.retry = retry
        self.batchSize = batchSize
        self.inFlight = max(1, inFlight)
        self.stop = stop
        self.sleep = sleep
    }

    /// Uploads until nothing is unsynced. Throws `StoppedByRequest` between
    /// batches when a stop is requested (the batches in flight are finished
    /// and recorded first), an `APIError` when a request fails for good (the
    /// batches after it that were in flight are not marked: the next run sends
    /// them again).
    ///
    /// Up to `inFlight` requests are out at a time, and the local work
    /// overlaps them: as soon as batch k is acknowledged, the next batch is
    /// read, encoded and sent (k+1 … k+inFlight-1 are already out), and then k
    /// is marked synced and made durable (with the intervals it completes, in
    /// the same sync).
    @discardableResult
    public func syncAll() async throws -> UploadSummary {
        let started = Date()
        var summary = UploadSummary()
        let total = store.counts.unsyncedSamples, pendingDeletions = store.counts.pendingDeletions
        var fetched = store.intervalEntries().filter { $0.interval.status == .fetched }.sorted { $0.position < $1.position }[...]
        summary.intervalsSynced += try markIntervalsSynced(&fetched)
        try store.sync()
        // Batches sent and not yet acknowledged, oldest first; each is marked in that order.
        let store = store, batchSize = batchSize, stop = stop
        let batches = BatchesInFlight<StoredSample, StepSampleResponse>(
            limit: inFlight, read: { try store.unsyncedSamples(limit: batchSize, after: $0) }, position: \.position,
            post: { [unowned self] in send(prepare($0)) }, stopped: { stop?.isRequested == true })
        defer { batches.cancelAll() }
        try batches.fill()
        while let (current, request) = batches.next() {
            do {
                let (response, retries) = try await request.value
                try batches.fill()
                summary.retries += retries
                summary.samplesSavedByServer += response.saved
                summary.samplesSynced += try store.markSynced(current)
                summary.batches += 1
            } catch let error as APIError {
                // A sample of the batch is refused: find which, send the rest, record it rejected.
                guard let refusal = SampleRefusal(error) else { throw error }
                try await settleRefused(current, refusal, &summary)
                try batches.fill()
            }
            summary.intervalsSynced += try markIntervalsSynced(&fetched)
            try store.sync()
            onProgress?(UploadProgress(batches: summary.batches, samplesSynced: summary.samplesSynced, samplesTotal: total,
                                       deletionsAcknowledged: 0, deletionsTotal: pendingDeletions,
                                       retries: summary.retries, seconds: Date().timeIntervalSince(started)))
            if batches.isEmpty, stop?.isRequested == true, store.counts.unsyncedSamples > 0 {
                summary.seconds = Date().timeIntervalSince(started)
                throw StoppedByRequest(stage: "uploading")
            }
        }
        try await sendDeletions(&summary, started: started, samplesTotal: total)
        summary.seconds = Date().timeIntervalSince(started)
        return summary
    }

    /// Pending deletions, `batchSize` ids a request, as the samples go: up to
    /// `inFlight` requests out at once, each batch marked acknowledged and
    /// made durable after its 200 and after every batch before it (so a crash
    /// re-sends only batches the server may have taken, which it applies once).
    private func sendDeletions(_ summary: inout UploadSummary, started: Date, samplesTotal: Int) async throws {
        let total = store.counts.pendingDeletions
        guard total > 0 else { return }
        if stop?.isRequested == true {
            summary.seconds = Date().timeIntervalSince(started)
            throw StoppedByRequest(stage: "uploading deletions")
        }
        // Batches sent and not yet acknowledged, oldest first; each is marked in that order.
        let store = store, batchSize = batchSize, stop = stop
        let batches = BatchesInFlight<StoredDeletion, DeletionResponse>(
            limit: inFlight, read: { try store.pendingDeletions(limit: batchSize, after: $0) }, position: \.position,
            post: { [unowned self] in sendDeletions($0.map(\.id)) }, stopped: { stop?.isRequested == true })
        defer { batches.cancelAll() }
        try batches.fill()
        while let (current, request) = batches.next() {
            let (response, retries) = try await request.value
            try batches.fill()
            summary.retries += retries
            summary.deletionsAppliedByServer += response.deleted
            summary.deletionsAcknowledged += try store.markDeletionsAcknowledged(current)
            try store.sync()
            summary.batches += 1
            summary.deletionBatches += 1
            onProgress?(UploadProgress(batches: summary.batches, samplesSynced: summary.samplesSynced, samplesTotal: samplesTotal,
                                       deletionsAcknowledged: summary.deletionsAcknowledged, deletionsTotal: total,
                                       retries: summary.retries, seconds: Date().timeIntervalSince(started)))
            if batches.isEmpty, stop?.isRequested == true, store.counts.pendingDeletions > 0 {
                summary.seconds = Date().timeIntervalSince(started)
                throw StoppedByRequest(stage: "uploading deletions")
            }
        }
    }

    /// Starts posting a batch of deletions (with retries) on its own task.
    private func sendDeletions(_ ids: [UUID]) -> Task<(DeletionResponse, Int), Error> {
        let client = client, retry = retry, sleep = sleep, onRetry = onRetry
        return Task { [client, retry, sleep, onRetry] in
            try await BatchPoster.retrying(retry: retry, sleep: sleep, onRetry: onRetry) {
                try await client.postDeletions(ids)
            }
        }
    }

    /// A batch's samples and its encoded request body.
    private func prepare(_ batch: [StoredSample]) -> (samples: [StepSample], body: Data) {
        let samples = batch.map(\.sample)
        return (samples, StepsRequestBody.encode(samples, uploader: client.uploader))
    }

    /// Starts posting a prepared batch (with retries) on its own task.
    private func send(_ prepared: (samples: [StepSample], body: Data)) -> Task<(StepSampleResponse, Int), Error> {
        let client = client, retry = retry, sleep = sleep, onRetry = onRetry
        return Task { [client, retry, sleep, onRetry] in
            try await BatchPoster.post(prepared.samples, body: prepared.body, client: client, retry: retry, sleep: sleep, onRetry: onRetry)
        }
    }

    /// Records `synced` for fetched intervals whose status record precedes the
    /// first unsynced sample: every sample fetched for them is synced.
    private func markIntervalsSynced(_ fetched: inout ArraySlice<IntervalTable.Entry>) throws -> Int {
        guard let first = fetched.first else { return 0 }
        let floor = try store.firstUnsyncedPosition() ?? LogPosition(UInt64.max)
        guard first.position < floor else { return 0 }
        var done: [SyncInterval] = []
        while let entry = fetched.first, entry.position < floor {
            var interval = entry.interval
            interval.status = .synced
            done.append(interval)
            fetched = fetched.dropFirst()
        }
        try store.recordIntervals(done) // made durable by the caller's sync, after the markers before them
        return done.count
    }
}

/// Posting one batch with retries, on the batch's own task.
enum BatchPoster {
    /// Posts one batch, retrying what is worth retrying. Returns the answer
    /// and how many retries it took.
    static func post(_ samples: [StepSample], body: Data, client: APIClient, retry: RetryPolicy,
                             sleep: @Sendable (Double) async throws -> Void,
                             onRetry: (@Sendable (Int, Double, APIError) -> Void)?) async throws -> (StepSampleResponse, Int) {
        try await retrying(retry: retry, sleep: sleep, onRetry: onRetry) {
            try await client.postSteps(samples, encodedBody: body)
        }
    }

    /// Runs `request`, retrying what is worth retrying. Returns the answer and
    /// how many retries it took.
    static func retrying<T>(retry: RetryPolicy, sleep: @Sendable (Double) async throws -> Void,
                            onRetry: (@Sendable (Int, Double, APIError) -> Void)?,
                            _ request: () async throws -> T) async throws -> (T, Int) {
        var rng = SystemRandomNumberGenerator()
        var attempt = 1
        while true {
            do {
                return (try await request(), attempt - 1)
            } catch let error as APIError where error.isRetryable && attempt < retry.maxAttempts {
                attempt += 1
                let wait = retry.delay(beforeAttempt: attempt, retryAfter: error.retryAfter, using: &rng)
                onRetry?(attempt, wait, error)
                try await sleep(wait)
            }
        }
    }

}
