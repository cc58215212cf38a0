import Foundation
import StepLog

/// Where an upload is, for progress lines.
public struct UploadProgress: Sendable {
    public var batches: Int
    public var samplesSynced: Int
    public var samplesTotal: Int
    public var retries: Int
    public var seconds: Double
}

/// What an upload run did.
public struct UploadSummary: Sendable, Equatable {
    public var batches = 0
    /// Samples acknowledged and marked synced.
    public var samplesSynced = 0
    /// What the server said it newly wrote (less than sent when it already had some).
    public var samplesSavedByServer = 0
    public var retries = 0
    public var intervalsSynced = 0
    public var seconds = 0.0
}

/// Stage 2b of the seeds (001/002): unsynced samples, 1,000 at a time in log
/// order → `POST /steps` → on 200, mark them synced and sync the store →
/// repeat until none remain.
///
/// A sample is marked synced only after the server acknowledged it, and the
/// mark is durable before the next batch is sent, so a crash can only cause a
/// batch to be sent twice, which the server's idempotency absorbs. Connection
/// errors, timeouts and 5xx are retried with `RetryPolicy`; a 4xx stops with
/// the server's message. Fetched intervals become `synced` once every sample
/// written before their fetched record is synced (the upload goes in log
/// order, so this advances as batches are acknowledged).
public final class APISyncService {
    public static let defaultBatchSize = 1_000

    private let store: StepLogStore
    private let client: APIClient
    private let retry: RetryPolicy
    private let batchSize: Int
    private let stop: StopSignal?
    private let sleep: @Sendable (Double) async throws -> Void
    public var onProgress: ((UploadProgress) -> Void)?
    /// Called before each retry with the attempt number, the wait and the error.
    public var onRetry: ((Int, Double, APIError) -> Void)?
    private var rng = SystemRandomNumberGenerator()

    public init(store: StepLogStore, client: APIClient, retry: RetryPolicy = RetryPolicy(), batchSize: Int = defaultBatchSize,
                stop: StopSignal? = nil,
                sleep: @escaping @Sendable (Double) async throws -> Void = { try await Task.sleep(nanoseconds: UInt64($0 * 1e9)) }) {
        self.store = store
        self.client = client
        self.retry = retry
        self.batchSize = batchSize
        self.stop = stop
        self.sleep = sleep
    }

    /// Uploads until nothing is unsynced. Throws `StoppedByRequest` between
    /// batches when a stop is requested (the batch in flight is finished and
    /// recorded first), an `APIError` when a request fails for good.
    @discardableResult
    public func syncAll() async throws -> UploadSummary {
        let started = Date()
        var summary = UploadSummary()
        let total = store.counts.unsyncedSamples
        var fetched = store.intervalEntries().filter { $0.interval.status == .fetched }.sorted { $0.position < $1.position }[...]
        defer { summary.seconds = Date().timeIntervalSince(started) }
        while true {
            summary.intervalsSynced += try markIntervalsSynced(&fetched)
            if stop?.isRequested == true { throw StoppedByRequest(stage: "uploading") }
            let batch = try store.unsyncedSamples(limit: batchSize)
            if batch.isEmpty { break }
            let response = try await post(batch.map(\.sample), retries: &summary.retries)
            summary.samplesSavedByServer += response.saved
            summary.samplesSynced += try store.markSynced(batch)
            try store.sync()
            summary.batches += 1
            onProgress?(UploadProgress(batches: summary.batches, samplesSynced: summary.samplesSynced, samplesTotal: total,
                                       retries: summary.retries, seconds: Date().timeIntervalSince(started)))
        }
        return summary
    }

    /// Posts one batch, retrying what is worth retrying.
    private func post(_ samples: [StepSample], retries: inout Int) async throws -> StepSampleResponse {
        var attempt = 1
        while true {
            do {
                return try await client.postSteps(samples)
            } catch let error as APIError where error.isRetryable && attempt < retry.maxAttempts {
                attempt += 1
                retries += 1
                let wait = retry.delay(beforeAttempt: attempt, using: &rng)
                onRetry?(attempt, wait, error)
                try await sleep(wait)
            }
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
        try store.recordIntervals(done)
        try store.sync()
        return done.count
    }
}
