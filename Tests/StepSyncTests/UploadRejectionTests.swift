import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Issue #13 point 5: a sample the server refuses never blocks the upload.
/// The batch is split until the refused sample is found, the others arrive,
/// and the refused one is kept rejected, with the server's reason, until its
/// content changes.
@Suite struct UploadRejectionTests {
    let now = uploadTestNow
    static let poison = "com.example.poison"
    static let reason = "sourceBundleId: refused by this test server"

    func ingested(days: Int) async throws -> (TemporaryDirectory, StepLogStore) { try await ingestedStore(days: days) }

    func service(_ store: StepLogStore, _ client: APIClient) -> APISyncService { uploadService(store, client, attempts: 4) }

    /// A server that refuses every sample from the poison bundle.
    func strictServer() -> InMemoryAPIClient {
        InMemoryAPIClient(rejecting: { $0.sourceBundleId == Self.poison ? Self.reason : nil })
    }

    /// Turns the samples at `indices` (of the store's samples by start) into poisoned ones.
    func poison(_ store: StepLogStore, _ indices: [Int]) throws -> [StepSample] {
        let all = try SampleExport.sortedByStart(store)
        let poisoned = indices.map { i -> StepSample in
            var s = all[i]
            s.sourceBundleId = Self.poison
            return s
        }
        try store.upsert(poisoned, fetchedAt: now)
        try store.sync()
        return poisoned
    }

    @Test func refusedSamplesAreQuarantinedAndTheOthersArrive() async throws {
        let (dir, store) = try await ingested(days: 30); defer { withExtendedLifetime(dir) {} }
        let poisoned = try poison(store, [5, 1_234, 1_240, 3_000])
        let server = strictServer()
        let summary = try await service(store, server).syncAll()
        #expect(summary.samplesRejected == 4)
        #expect(Set(summary.firstRejections.map(\.id)) == Set(poisoned.map(\.id)))
        #expect(summary.firstRejections.allSatisfy { $0.reason == Self.reason })
        let counts = store.counts
        #expect(counts.rejectedSamples == 4 && counts.unsyncedSamples == 0 && counts.syncedSamples == counts.samples - 4)
        #expect(summary.samplesSynced == counts.samples - 4)
        // Every other sample arrived, exactly once; no poisoned one did.
        #expect(server.live.count == counts.samples - 4 && server.records.count == server.live.count)
        #expect(poisoned.allSatisfy { server.live[$0.id.uuidString] == nil })
        #expect(Set(try store.rejectedSamples().map(\.rejection.reason)) == [Self.reason])
        // Intervals are settled too: nothing fetched is left waiting.
        #expect(counts.intervals[.fetched] == 0)
        #expect(PipelineStage.of(store) == .synced)

        // A re-run sends nothing.
        let posts = server.postCount
        let again = try await service(store, server).syncAll()
        #expect(again.batches == 0 && again.samplesRejected == 0 && server.postCount == posts)

        // Fixed at the source (its content changes): sent again, and it arrives.
        var fixed = poisoned[2]
        fixed.sourceBundleId = "com.apple.health"
        try store.upsert([fixed], fetchedAt: now)
        #expect(store.counts.rejectedSamples == 3 && store.counts.unsyncedSamples == 1)
        let third = try await service(store, server).syncAll()
        #expect(third.samplesSynced == 1 && third.samplesRejected == 0)
        #expect(server.live[fixed.id.uuidString]?.sourceBundleId == "com.apple.health")

        // Reopening and compaction keep the other three rejections.
        try store.close()
        let reopened = try StepLogStore.open(dir.path)
        #expect(reopened.counts.rejectedSamples == 3)
        try reopened.close()
        _ = try StepLogStore.compact(directory: dir.path)
        let compacted = try StepLogStore.open(dir.path)
        #expect(compacted.counts.rejectedSamples == 3 && compacted.counts.unsyncedSamples == 0)
        #expect(Set(try compacted.rejectedSamples().map(\.sample.id)) == Set([poisoned[0], poisoned[1], poisoned[3]].map(\.id)))
        let fourth = try await service(compacted, server).syncAll()
        #expect(fourth.batches == 0 && server.postCount == posts + 1)
    }

    @Test func anIndexThatNamesTheWrongSampleIsCheckedBySplitting() async throws {
        let (dir, store) = try await ingested(days: 10); defer { withExtendedLifetime(dir) {} }
        let poisoned = try poison(store, [100])
        // This server names the sample after the bad one.
        let server = InMemoryAPIClient(rejecting: { $0.sourceBundleId == Self.poison ? Self.reason : nil })
        let lying = MisnumberingClient(server)
        let summary = try await service(store, lying).syncAll()
        #expect(summary.samplesRejected == 1 && summary.firstRejections.map(\.id) == [poisoned[0].id])
        #expect(server.live.count == store.counts.samples - 1 && server.live[poisoned[0].id.uuidString] == nil)
        #expect(store.counts.unsyncedSamples == 0 && store.counts.rejectedSamples == 1)
    }

    @Test func aRequestLevel400StillStopsAndMarksNothing() async throws {
        let (dir, store) = try await ingested(days: 5); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        server.inject([.status(400, "{\"error\":\"body is not valid JSON (line 1, column 2): expected value\"}")])
        await #expect(throws: APIError.self) { try await service(store, server).syncAll() }
        #expect(store.counts.syncedSamples == 0 && store.counts.rejectedSamples == 0)
        #expect(SampleRefusal(message: "body is not valid JSON") == nil)
        #expect(SampleRefusal(message: "samples[3].count: must be an integer (got number 1.5)")
            == SampleRefusal(index: 3, reason: "count: must be an integer (got number 1.5)"))
        #expect(SampleRefusal(message: "samples[12]: must be an object (got string)")?.reason == "must be an object (got string)")
    }
}

/// Forwards to a server and adds one to the sample index its 400s name.
final class MisnumberingClient: APIClient, @unchecked Sendable {
    let inner: InMemoryAPIClient
    init(_ inner: InMemoryAPIClient) { self.inner = inner }

    func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        do {
            return try await inner.postSteps(samples)
        } catch APIError.serverError(400, let body?, _) {
            guard let refusal = SampleRefusal(message: APIError.oneLine(body)) else { throw APIError.serverError(statusCode: 400, message: body) }
            throw APIError.serverError(statusCode: 400, message: "{\"error\":\"samples[\(refusal.index + 1)].\(refusal.reason)\"}")
        }
    }

    func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse { try await inner.postDeletions(ids) }
    func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse { try await inner.getSteps(limit: limit, offset: offset) }
    func healthCheck() async throws -> Bool { true }
    func digest(uploader: String) async throws -> UploaderDigestResponse { try await inner.digest(uploader: uploader) }
    func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage { try await inner.dayDigests(uploader: uploader, after: after) }
    func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage {
        try await inner.daySamples(uploader: uploader, day: day, after: after)
    }
    func lookup(_ ids: [UUID]) async throws -> LookupResponse { try await inner.lookup(ids) }
}
