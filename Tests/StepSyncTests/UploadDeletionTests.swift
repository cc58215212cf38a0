import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// APISyncService sending deletions beside additions, against the in-memory
/// server: each deletion applied once, acknowledged only after the 200, and
/// the store's last word on a UUID is the server's.
@Suite struct UploadDeletionTests {
    let now = uploadTestNow

    func ingested(days: Int) async throws -> (TemporaryDirectory, StepLogStore) { try await ingestedStore(days: days) }

    func service(_ store: StepLogStore, _ client: APIClient, attempts: Int = 8, stop: StopSignal? = nil) -> APISyncService {
        uploadService(store, client, attempts: attempts, stop: stop)
    }

    /// The store's live samples as the server's DTOs, by id.
    func liveDTOs(_ store: StepLogStore) throws -> [String: StepSampleDTO] {
        var result: [String: StepSampleDTO] = [:]
        try store.forEachSample { s in
            let x = s.sample
            result[x.id.uuidString] = StepSampleDTO(id: x.id.uuidString, startDate: ISO8601.format(milliseconds: x.startMilliseconds),
                                                    endDate: ISO8601.format(milliseconds: x.endMilliseconds), countThousandths: x.countThousandths,
                                                    sourceBundleId: x.sourceBundleId, sourceDeviceName: x.sourceDeviceName)
        }
        return result
    }

    @Test func deletionsGoInTheSameRunAsAdditionsAThousandARequest() async throws {
        let (dir, store) = try await ingested(days: 60); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        let all = try SampleExport.sortedByStart(store)
        #expect(all.count > 5_000)
        // 2,500 deletions and 300 changed samples, both waiting at once.
        let deleted = all.enumerated().filter { $0.offset % 2 == 0 }.prefix(2_500).map(\.element.id)
        try store.delete(deleted, at: now)
        var changed = all.enumerated().filter { $0.offset % 2 == 1 }.prefix(300).map(\.element)
        for i in changed.indices { changed[i].count += 1 }
        try store.upsert(changed, fetchedAt: now)
        try store.sync()
        #expect(store.counts.pendingDeletions == 2_500 && store.counts.unsyncedSamples == 300)

        let summary = try await service(store, server).syncAll()
        #expect(summary.samplesSynced == 300 && summary.samplesSavedByServer == 300)
        #expect(summary.deletionsAcknowledged == 2_500 && summary.deletionsAppliedByServer == 2_500)
        #expect(summary.deletionBatches == 3 && server.deletionPostCount == 3 && summary.batches == 4)
        #expect(store.counts.pendingDeletions == 0 && store.counts.unsyncedSamples == 0)
        #expect(server.deletions.count == 2_500 && Set(server.deletions) == Set(deleted.map(\.uuidString)))
        #expect(server.live == (try liveDTOs(store)))
        for id in deleted.prefix(20) { #expect(try store.sampleState(id: id) == .absent) }
        // Nothing left: a second run sends nothing.
        let again = try await service(store, server).syncAll()
        #expect(again.batches == 0 && server.deletionPostCount == 3)
    }

    @Test func theStoresLastWordOnAUUIDIsTheServers() async throws {
        let (dir, store) = try await ingested(days: 5); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        let all = try SampleExport.sortedByStart(store)
        let a = all[0], b = all[1], c = all[2]
        // a: re-added after its deletion (the revival is what the server keeps).
        try store.delete([a.id], at: now)
        var a2 = a
        a2.count += 7
        try store.upsert([a2], fetchedAt: now)
        // b: changed, then deleted (the deletion wins).
        var b2 = b
        b2.count += 1
        try store.upsert([b2], fetchedAt: now)
        try store.delete([b.id], at: now)
        // c: deleted, revived unchanged, deleted again: one deletion.
        try store.delete([c.id], at: now)
        try store.upsert([c], fetchedAt: now)
        try store.delete([c.id], at: now)
        try store.sync()
        let summary = try await service(store, server).syncAll()
        #expect(summary.samplesSynced == 1 && summary.deletionsAcknowledged == 2)
        #expect(server.live[a.id.uuidString]?.count == a2.count)
        #expect(server.live[b.id.uuidString] == nil && server.live[c.id.uuidString] == nil)
        #expect(server.deletions == [b.id.uuidString, c.id.uuidString])
        #expect(server.live == (try liveDTOs(store)))
    }

    @Test func aLostAnswerIsRetriedAndNothingIsMarkedBeforeThe200() async throws {
        let (dir, store) = try await ingested(days: 20); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        let ids = try SampleExport.sortedByStart(store).prefix(1_500).map(\.id)
        try store.delete(ids, at: now)
        try store.sync()
        // Three failures in a row with three attempts: the run fails, nothing is marked.
        server.injectIntoDeletions([.acceptThenNetwork, .status(503, "busy"), .network])
        await #expect(throws: APIError.self) { try await service(store, server, attempts: 3).syncAll() }
        #expect(store.counts.pendingDeletions == 1_500)
        #expect(server.deletions.count == 1_000) // the first request was applied, its answer lost
        // Reopened (as after a kill), the next run sends them again; the server applies each once.
        try store.close()
        let reopened = try StepLogStore.open(dir.path)
        #expect(reopened.counts.pendingDeletions == 1_500)
        server.injectIntoDeletions([.acceptThenNetwork])
        let summary = try await service(reopened, server).syncAll()
        #expect(summary.retries == 1 && summary.deletionsAcknowledged == 1_500)
        // The first 1,000 were deleted at the server in the failed run: only the last 500 were live.
        #expect(summary.deletionsAppliedByServer == 500)
        #expect(server.deletions.count == 1_500 && Set(server.deletions).count == 1_500)
        #expect(reopened.counts.pendingDeletions == 0)
        try reopened.close()
        #expect(try StepLogStore.open(dir.path).counts.pendingDeletions == 0)
    }

    @Test func aStopBetweenDeletionBatchesLeavesTheRestPending() async throws {
        let (dir, store) = try await ingested(days: 20); defer { withExtendedLifetime(dir) {} }
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        try store.delete(try SampleExport.sortedByStart(store).prefix(3_500).map(\.id), at: now)
        try store.sync()
        let stop = StopSignal()
        let upload = service(store, server, stop: stop)
        upload.onProgress = { p in if p.deletionsAcknowledged == 1_000 { stop.request() } }
        await #expect(throws: StoppedByRequest.self) { try await upload.syncAll() }
        // The second batch was out (sent as the first was answered) when the first's progress asked
        // to stop: it is finished and marked, and nothing after it is sent.
        #expect(store.counts.pendingDeletions == 1_500 && server.deletions.count == 2_000 && server.deletionPostCount == 2)
    }

    @Test func statusSaysReadyToUploadBeforeAnyUploadAndUploadingAfter() async throws {
        let (dir, store) = try await ingested(days: 5); defer { withExtendedLifetime(dir) {} }
        #expect(PipelineStage.of(store) == .readyToUpload)
        let server = InMemoryAPIClient()
        try await service(store, server).syncAll()
        #expect(PipelineStage.of(store) == .synced)
        let first = try #require(try SampleExport.sortedByStart(store).first)
        try store.delete([first.id], at: now)
        #expect(PipelineStage.of(store) == .uploading)
        try await service(store, server).syncAll()
        #expect(PipelineStage.of(store) == .synced)
    }
}
