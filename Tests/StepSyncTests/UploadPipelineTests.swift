import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// APISyncService with several requests in flight: batches are acknowledged
/// (marked synced, durably) in the order sent, so an interruption re-sends
/// only the batches not acknowledged, which the server takes idempotently.
@Suite struct UploadPipelineTests {
    @Test(arguments: [2, 3, 4])
    func everySampleArrivesOnceUnderFaults(inFlight: Int) async throws {
        let (dir, store) = try await ingestedStore(days: 30); defer { withExtendedLifetime(dir) {} }
        let samples = try SampleExport.sortedByStart(store)
        let server = InMemoryAPIClient()
        server.inject([.status(500, "boom"), .network, .acceptThenNetwork, .status(503, "busy"), .acceptThenNetwork])
        let summary = try await uploadService(store, server, inFlight: inFlight).syncAll()
        #expect(summary.retries == 5)
        #expect(summary.samplesSynced == samples.count && summary.batches == (samples.count + 999) / 1_000)
        #expect(server.records.count == samples.count) // each once, though two batches were taken twice
        #expect(Set(server.records.map(\.id)) == Set(samples.map(\.id.uuidString)))
        #expect(store.counts.unsyncedSamples == 0)
        #expect(store.counts.intervals[.fetched] == 0 && (store.counts.intervals[.synced] ?? 0) > 0)
    }

    @Test func aFailureMidPipelineResendsOnlyTheUnacknowledgedBatches() async throws {
        let (dir, store) = try await ingestedStore(days: 30); defer { withExtendedLifetime(dir) {} }
        let order = try store.unsyncedSamples(limit: .max).map(\.sample.id.uuidString)
        let batches = (order.count + 999) / 1_000
        #expect(batches >= 6)
        let server = InMemoryAPIClient()
        // Batch 3 fails for good, but only once batch 4, sent while 3 was out, has been taken by the
        // server: the state a crash leaves when it comes after the server saved batch 4 and before
        // the client recorded anything of it.
        let client = GatedClient(inner: server, failing: order[3_000], after: order[4_000])
        await #expect(throws: APIError.self) { try await uploadService(store, client, inFlight: 2).syncAll() }
        #expect(client.gateOpened)
        #expect(store.counts.syncedSamples == 3_000) // batches 0-2, acknowledged in order
        #expect(server.records.count == 4_000 && server.live[order[4_000]] != nil) // batch 4 taken, not acknowledged
        let postsBefore = server.postCount
        let again = try await uploadService(store, server, inFlight: 2).syncAll()
        // The second run sends batches 3 onwards only: 3 is new to the server, 4 again (saved 0).
        #expect(server.postCount - postsBefore == batches - 3 && again.batches == batches - 3)
        #expect(again.samplesSynced == order.count - 3_000 && again.samplesSavedByServer == order.count - 4_000)
        #expect(server.records.count == order.count && Set(server.records.map(\.id)) == Set(order))
        #expect(store.counts.unsyncedSamples == 0)
    }

    @Test func aStopFinishesTheBatchesInFlight() async throws {
        let (dir, store) = try await ingestedStore(days: 30); defer { withExtendedLifetime(dir) {} }
        let stop = StopSignal()
        let server = InMemoryAPIClient()
        let upload = uploadService(store, server, inFlight: 2, stop: stop)
        upload.onProgress = { p in if p.batches == 2 { stop.request() } }
        await #expect(throws: StoppedByRequest.self) { try await upload.syncAll() }
        // Batches 3 and 4 were out when batch 2's progress asked to stop: both
        // are finished and marked, and nothing after them is sent.
        #expect(store.counts.syncedSamples == 4_000 && server.records.count == 4_000 && server.postCount == 4)
        try await uploadService(store, server, inFlight: 2).syncAll()
        #expect(store.counts.unsyncedSamples == 0 && server.records.count == store.counts.samples)
    }
}

/// Deletions go the same way: several requests in flight, acknowledged in the order sent.
@Suite struct UploadDeletionPipelineTests {
    let now = uploadTestNow

    /// A store uploaded to `server`, then `count` of its samples deleted (pending, in log order).
    func storeWithDeletions(_ count: Int, server: InMemoryAPIClient) async throws -> (TemporaryDirectory, StepLogStore, [String]) {
        let (dir, store) = try await ingestedStore(days: 45)
        try await uploadService(store, server).syncAll()
        try store.delete(try SampleExport.sortedByStart(store).prefix(count).map(\.id), at: now)
        try store.sync()
        let order = try store.pendingDeletions(limit: .max).map(\.id.uuidString)
        #expect(order.count == count)
        return (dir, store, order)
    }

    @Test(arguments: [2, 3, 4])
    func everyDeletionArrivesOnceUnderFaults(inFlight: Int) async throws {
        let server = InMemoryAPIClient()
        let (dir, store, order) = try await storeWithDeletions(6_500, server: server); defer { withExtendedLifetime(dir) {} }
        server.injectIntoDeletions([.status(500, "boom"), .network, .acceptThenNetwork, .status(503, "busy"), .acceptThenNetwork])
        let summary = try await uploadService(store, server, inFlight: inFlight).syncAll()
        #expect(summary.retries == 5 && summary.deletionBatches == 7 && server.deletionPostCount == 7 + 5)
        // Two batches were applied and their answers lost: their retries delete nothing more.
        #expect(summary.deletionsAcknowledged == 6_500 && summary.deletionsAppliedByServer >= 6_500 - 2_000)
        #expect(server.deletions.count == 6_500 && Set(server.deletions) == Set(order)) // each applied once
        #expect(store.counts.pendingDeletions == 0)
        try store.close()
        #expect(try StepLogStore.open(dir.path).counts.pendingDeletions == 0)
    }

    @Test func aFailureMidPipelineLeavesTheUnacknowledgedBatchesPending() async throws {
        let server = InMemoryAPIClient()
        let (dir, store, order) = try await storeWithDeletions(6_000, server: server); defer { withExtendedLifetime(dir) {} }
        // Batch 3 fails for good once batch 4, out beside it, was applied by the server.
        let client = GatedClient(inner: server, failing: order[3_000], after: order[4_000], deletions: true)
        await #expect(throws: APIError.self) { try await uploadService(store, client, inFlight: 2).syncAll() }
        #expect(client.gateOpened)
        #expect(store.counts.pendingDeletions == 3_000) // batches 0-2 acknowledged, in order
        #expect(server.deletions.count == 4_000) // batch 4 applied, not acknowledged
        try store.close()
        let reopened = try StepLogStore.open(dir.path)
        let again = try await uploadService(reopened, server, inFlight: 2).syncAll()
        // Batches 3 onwards are sent again: 3 is new to the server, 4 deletes nothing more.
        #expect(again.deletionBatches == 3 && again.deletionsAcknowledged == 3_000 && again.deletionsAppliedByServer == 2_000)
        #expect(server.deletions.count == 6_000 && Set(server.deletions) == Set(order))
        #expect(reopened.counts.pendingDeletions == 0)
    }
}

/// Forwards to `inner`; the batch (of samples, or with `deletions` of ids)
/// starting with `failing` waits until `inner` holds the sample `after`, or
/// has applied its deletion (a later batch, in flight beside it), then fails
/// with a 400 that names no sample (given up, not retried).
final class GatedClient: APIClient, @unchecked Sendable {
    let inner: InMemoryAPIClient
    let failing: String
    let after: String
    let deletions: Bool
    private let lock = NSLock()
    private var opened = false
    var gateOpened: Bool { lock.withLock { opened } }

    init(inner: InMemoryAPIClient, failing: String, after: String, deletions: Bool = false) {
        self.inner = inner
        self.failing = failing
        self.after = after
        self.deletions = deletions
    }

    private func afterIsThere() -> Bool { deletions ? inner.deletions.contains(after) : inner.live[after] != nil }

    private func gate() async throws -> Never {
        let deadline = Date().addingTimeInterval(10)
        while !afterIsThere() && Date() < deadline { try await Task.sleep(nanoseconds: 1_000_000) }
        let there = afterIsThere()
        lock.withLock { opened = there }
        throw APIError.serverError(statusCode: 400, message: "{\"error\":\"body is not valid JSON\"}")
    }

    func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        if !deletions, samples.first?.id.uuidString == failing { try await gate() }
        return try await inner.postSteps(samples)
    }

    func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse {
        if deletions, ids.first?.uuidString == failing { try await gate() }
        return try await inner.postDeletions(ids)
    }

    func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse { try await inner.getSteps(limit: limit, offset: offset) }
    func healthCheck() async throws -> Bool { true }
    func digest(uploader: String) async throws -> UploaderDigestResponse { try await inner.digest(uploader: uploader) }
    func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage { try await inner.dayDigests(uploader: uploader, after: after) }
    func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage {
        try await inner.daySamples(uploader: uploader, day: day, after: after)
    }
    func lookup(_ ids: [UUID]) async throws -> LookupResponse { try await inner.lookup(ids) }
}
