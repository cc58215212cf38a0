import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// APISyncService against the in-memory server: exactly-once under faults.
@Suite struct UploadTests {
    let now = uploadTestNow

    func ingested(days: Int = 30) async throws -> (TemporaryDirectory, StepLogStore) { try await ingestedStore(days: days) }

    func service(_ store: StepLogStore, _ client: APIClient, attempts: Int = 8, stop: StopSignal? = nil) -> APISyncService {
        uploadService(store, client, attempts: attempts, stop: stop)
    }

    @Test func everySampleArrivesOnceAndIntervalsBecomeSynced() async throws {
        let (dir, store) = try await ingested(); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        let summary = try await service(store, server).syncAll()
        let samples = try SampleExport.sortedByStart(store)
        #expect(summary.samplesSynced == samples.count && summary.samplesSavedByServer == samples.count)
        #expect(summary.batches == (samples.count + 999) / 1_000)
        #expect(summary.seconds > 0)
        #expect(server.records.count == samples.count)
        #expect(Set(server.records.map(\.id)) == Set(samples.map(\.id.uuidString)))
        #expect(store.counts.unsyncedSamples == 0)
        #expect(store.counts.intervals[.fetched] == 0 && (store.counts.intervals[.synced] ?? 0) > 0)
        // The JSON shape on the wire.
        let first = try #require(server.records.first)
        #expect(first.startDate.hasSuffix("Z") && first.id == first.id.uppercased())
        // Nothing left: a second run sends nothing.
        let again = try await service(store, server).syncAll()
        #expect(again.batches == 0 && server.postCount == summary.batches)
    }

    @Test func serverErrorsAndLostAnswersAreRetriedWithoutDuplicates() async throws {
        let (dir, store) = try await ingested(); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        server.inject([.status(500, "boom"), .network, .acceptThenNetwork, .status(503, "busy"), .acceptThenNetwork])
        let summary = try await service(store, server).syncAll()
        #expect(summary.retries == 5)
        #expect(server.records.count == store.counts.samples) // each once, though two batches were sent twice
        #expect(store.counts.unsyncedSamples == 0)
    }

    @Test func aClientErrorStopsWithTheServersMessageAndMarksNothing() async throws {
        let (dir, store) = try await ingested(); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        server.inject([.status(400, "{\"error\":\"body is not valid JSON (line 1, column 2): expected value\"}")])
        await #expect(throws: APIError.self) { try await service(store, server).syncAll() }
        #expect(store.counts.syncedSamples == 0)
        // A 400 naming a sample is checked by sending that sample alone: here it is
        // accepted (the refusal was not the sample's), so nothing is rejected.
        server.inject([.status(400, "{\"error\":\"samples[3].count: must be an integer\"}")])
        let summary = try await service(store, server).syncAll()
        #expect(summary.samplesRejected == 0 && store.counts.rejectedSamples == 0 && store.counts.unsyncedSamples == 0)
        #expect(server.records.count == store.counts.samples)
        #expect(APIError.serverError(statusCode: 400, message: "{\"error\":\"samples[3].count: must be an integer\"}").description
            == "server error 400: samples[3].count: must be an integer")
        #expect(!APIError.serverError(statusCode: 400, message: nil).isRetryable)
    }

    @Test func retriesAreBoundedAndNothingUnacknowledgedIsMarked() async throws {
        let (dir, store) = try await ingested(); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        server.inject([Fault](repeating: .status(500, "down"), count: 3))
        await #expect(throws: APIError.self) { try await service(store, server, attempts: 3).syncAll() }
        #expect(server.postCount == 3)
        #expect(store.counts.syncedSamples == 0)
        try await service(store, server, attempts: 3).syncAll() // the server is back
        #expect(store.counts.unsyncedSamples == 0 && server.records.count == store.counts.samples)
    }

    @Test func syncedMarksSurviveReopenAndAChangedSampleIsSentAgain() async throws {
        let (dir, store) = try await ingested(days: 10)
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        try store.close()
        let reopened = try StepLogStore.open(dir.path)
        #expect(reopened.counts.unsyncedSamples == 0)
        var changed = try SampleExport.sortedByStart(reopened)[5]
        changed.count += 1
        try reopened.upsert([changed], fetchedAt: Date())
        let summary = try await service(reopened, server).syncAll()
        #expect(summary.samplesSynced == 1 && summary.samplesSavedByServer == 1)
        #expect(server.records.last?.count == changed.count && server.records.last?.id == changed.id.uuidString)
    }

    @Test func aStopFinishesTheBatchInFlight() async throws {
        let (dir, store) = try await ingested(); defer { withExtendedLifetime(dir) {} }
        let stop = StopSignal()
        let server = InMemoryAPIClient()
        let upload = service(store, server, stop: stop)
        upload.onProgress = { p in if p.batches == 2 { stop.request() } }
        await #expect(throws: StoppedByRequest.self) { try await upload.syncAll() }
        // Batch 3 was already in flight when batch 2's progress asked to stop:
        // it is finished and marked, and nothing after it is sent.
        #expect(store.counts.syncedSamples == 3_000 && server.records.count == 3_000 && server.postCount == 3)
    }

    @Test func aRetryWaitsAtLeastTheServersRetryAfter() async throws {
        let (dir, store) = try await ingested(days: 5); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        // A failover: the server asks for 3 s, then for more than the policy's longest wait; a
        // 503 without the header waits the policy's own back-off.
        server.inject([.status(503, "database unavailable", retryAfter: 3), .status(503, "no server", retryAfter: 60),
                       .status(503, "busy")])
        let waits = WaitLog()
        let upload = APISyncService(store: store, client: server, retry: RetryPolicy(maxAttempts: 8, initialDelay: 0.001, maxDelay: 20),
                                    inFlight: 1, sleep: { waits.add($0) })
        let summary = try await upload.syncAll()
        #expect(summary.retries == 3 && store.counts.unsyncedSamples == 0)
        #expect(waits.all.count == 3)
        #expect(waits.all[0] >= 3 && waits.all[0] <= 3.01)
        #expect(waits.all[1] == 20) // capped at maxDelay
        #expect(waits.all[2] <= 0.01)
    }

    @Test func backoffGrowsAndIsBounded() {
        let policy = RetryPolicy(maxAttempts: 10, initialDelay: 0.5, maxDelay: 4)
        #expect((2...10).map { policy.ceiling(beforeAttempt: $0) } == [0.5, 1, 2, 4, 4, 4, 4, 4, 4])
        var rng = SeededGenerator(seed: 1)
        let waits = (0..<200).map { _ in policy.delay(beforeAttempt: 4, using: &rng) }
        #expect(waits.allSatisfy { $0 >= 0 && $0 <= 2 })
        #expect(Set(waits).count > 100) // jittered
        // A Retry-After is the least wait, up to maxDelay.
        #expect((0..<200).allSatisfy { _ in policy.delay(beforeAttempt: 2, retryAfter: 3, using: &rng) == 3 })
        #expect(policy.delay(beforeAttempt: 9, retryAfter: 60, using: &rng) == 4)
    }
}

typealias Fault = InMemoryAPIClient.Fault

/// The waits an upload slept, in order.
final class WaitLog: @unchecked Sendable {
    private let lock = NSLock()
    private var waits: [Double] = []
    func add(_ seconds: Double) { lock.withLock { waits.append(seconds) } }
    var all: [Double] { lock.withLock { waits } }
}
