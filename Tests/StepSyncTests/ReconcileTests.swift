import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The checked upload and the reconcile against the in-memory server, which
/// keeps who wrote what and answers the digest routes as the real one does
/// (docs/RECONCILE.md): in sync costs one request; a restored backup, a day
/// lost, a count changed, a deletion lost are found and repaired; another
/// store's later word is left alone; a new server gets everything.
@Suite struct ReconcileTests {
    /// A checked upload of `store` to `client` (which must write as `uploader`).
    func checked(_ store: StepLogStore, _ client: InMemoryAPIClient, full: Bool = false, dryRun: Bool = false) async throws -> CheckedUploadSummary {
        let uploader = UUID(uuidString: try #require(client.uploader))!
        return try await CheckedUpload(store: store, client: client, service: uploadService(store, client), url: "http://test",
                                       uploader: uploader, now: { uploadTestNow }).run(full: full, dryRun: dryRun)
    }

    func storeSamples(_ store: StepLogStore) throws -> [String: StepSampleDTO] {
        var samples: [String: StepSampleDTO] = [:]
        try store.forEachSample {
            var s = $0.sample
            s.origin = .unspecified
            samples[s.id.uuidString] = InMemoryAPIClient.dto(s)
        }
        return samples
    }

    /// The server holds exactly the store's live samples.
    func expectEqual(_ server: InMemoryAPIClient, _ store: StepLogStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let held = server.live, mine = try storeSamples(store)
        #expect(held.count == mine.count && held == mine,
                "\(Set(mine.keys).subtracting(held.keys).count) missing, \(Set(held.keys).subtracting(mine.keys).count) unexpected",
                sourceLocation: sourceLocation)
    }

    func newClient(_ store: StepLogStore) -> InMemoryAPIClient {
        InMemoryAPIClient(uploader: CheckedUpload.uploader(of: store).uuidString)
    }

    @Test func inSyncCostsOneRequestAndARestoredBackupIsHealed() async throws {
        let (dir, store) = try await ingestedStore(days: 20)
        defer { withExtendedLifetime(dir) {} }
        let server = newClient(store)
        let first = try await checked(store, server)
        #expect(first.provenEqual && first.upload.samplesSynced == store.counts.samples)
        #expect(first.checkRequests == 2, "the identity (an empty server: no day digests) and the check after sending")
        #expect(store.destination?.serverId == server.serverId && store.destination!.provenEqualAtMilliseconds > 0)
        let backup = server.backup()

        let before = server.digestRequests
        let again = try await checked(store, server)
        #expect(again.provenEqual && again.upload.batches == 0 && again.reconciles.isEmpty)
        #expect(server.digestRequests - before == 1, "in sync: one request")

        // New samples uploaded, then the server goes back to the backup.
        try store.upsert((0..<300).map { StepSample(id: UUID(), startMilliseconds: testEndDay * day - Int64($0) * 600_000,
                                                     endMilliseconds: testEndDay * day - Int64($0) * 600_000 + 60_000, count: $0,
                                                     sourceBundleId: "com.example.app", sourceDeviceName: nil) }, fetchedAt: uploadTestNow)
        #expect(try await checked(store, server).upload.samplesSynced == 300)
        server.restore(backup)
        let healed = try await checked(store, server)
        #expect(healed.provenEqual && healed.upload.samplesSynced == 300)
        #expect(healed.reconciles.count == 1 && healed.reconciles[0].samplesMissing == 300)
        try expectEqual(server, store)
    }

    /// A server from before reconciliation (no `GET /steps/digest`): the
    /// upload runs, said unchecked, and sends everything the store had
    /// acknowledged elsewhere; the next is in step with it; `full` cannot run.
    @Test func aServerWithoutDigestsGetsEverythingAndIsSaidUnchecked() async throws {
        let (dir, store) = try await ingestedStore(days: 10)
        defer { withExtendedLifetime(dir) {} }
        let named = newClient(store)
        #expect(try await checked(store, named).provenEqual)
        let older = newClient(store)
        older.offersDigests = false
        let first = try await checked(store, older)
        #expect(first.unchecked && !first.provenEqual && first.upload.samplesSynced == store.counts.samples)
        try expectEqual(older, store)
        #expect(store.destination?.serverId == "" && store.destination?.url == "http://test")
        let again = try await checked(store, older)
        #expect(again.unchecked && again.upload.batches == 0 && again.reconciles.isEmpty)
        await #expect(throws: APIError.self) { _ = try await checked(store, older, full: true) }
        // Back to the named server: a destination other than the store's, reconciled, and proven.
        let back = try await checked(store, named)
        #expect(back.provenEqual && !back.unchecked && back.reconciles.first?.newDestination == true)
        try expectEqual(named, store)
    }

    @Test func aDayLostACountChangedAndADeletionLostAreRepaired() async throws {
        let (dir, store) = try await ingestedStore(days: 15)
        defer { withExtendedLifetime(dir) {} }
        let server = newClient(store)
        _ = try await checked(store, server)
        // A day deleted and one sample's count changed behind the API's back.
        let victimDay = SampleDigest.day(try #require(server.held.values.first).sample)
        let lost = server.held.values.filter { SampleDigest.day($0.sample) == victimDay }.count
        let changed = try #require(server.held.values.first { SampleDigest.day($0.sample) != victimDay }).sample.id.uuidString
        server.tamper { held in
            held = held.filter { SampleDigest.day($0.value.sample) != victimDay }
            held[changed]!.sample.count += 1
        }
        let repaired = try await checked(store, server)
        let report = try #require(repaired.reconciles.first)
        #expect(report.samplesMissing == lost && report.versionsDifferent == 1 && report.deletionsLost == 0)
        #expect(report.daysDiffering == 2 && repaired.provenEqual && repaired.upload.samplesSynced == lost + 1, "\(report) \(repaired.upload) \(repaired.reconciles)")
        try expectEqual(server, store)

        // A deletion lost: deleted and acknowledged, then the server restored from before.
        let backup = server.backup()
        let gone = try store.unsyncedSamples(limit: 0) + [try #require(try store.sample(id: UUID(uuidString: changed)!))]
        try store.delete(gone.map(\.id), at: uploadTestNow)
        #expect(try await checked(store, server).upload.deletionsAcknowledged == 1)
        server.restore(backup)
        let restored = try await checked(store, server)
        #expect(restored.reconciles.first?.deletionsLost == 1 && restored.upload.deletionsAcknowledged == 1 && restored.provenEqual)
        try expectEqual(server, store)
    }

    @Test func anotherStoresLaterVersionIsLeftAloneAndTheCheckSettles() async throws {
        let (dir, phone) = try await ingestedStore(days: 10)
        defer { withExtendedLifetime(dir) {} }
        let server = newClient(phone)
        _ = try await checked(phone, server)
        // The laptop, another store of the same user, writes one of the phone's samples again, changed, and deletes another.
        let laptop = server.sharing(uploader: UUID().uuidString)
        let ids = server.held.keys.sorted()
        var changed = try #require(server.held[ids[3]]).sample
        changed.count += 5
        _ = try await laptop.postSteps([changed])
        _ = try await laptop.postDeletions([UUID(uuidString: ids[4])!])
        let result = try await checked(phone, server)
        #expect(result.reconciles.first?.heldByAnotherUploader == 2 && result.provenEqual)
        #expect(server.held[ids[3]]?.sample == changed && server.held[ids[4]] == nil, "the laptop's word stands")
        #expect(phone.counts.rejectedSamples == 2)
        let settled = try await checked(phone, server)
        #expect(settled.provenEqual && settled.reconciles.isEmpty && settled.checkRequests == 1)
        // The phone's own version of the sample changes: it is sent, as any change is.
        var mine = try #require(try phone.sample(id: UUID(uuidString: ids[3])!)).sample
        mine.count += 100
        try phone.upsert([mine], fetchedAt: uploadTestNow)
        #expect(try await checked(phone, server).upload.samplesSynced == 1)
        #expect(server.held[ids[3]]?.uploader == server.uploader)
    }

    @Test func aNewServerOrAccountGetsEveryLiveSampleAndADryRunWritesNothing() async throws {
        let (dir, store) = try await ingestedStore(days: 10)
        defer { withExtendedLifetime(dir) {} }
        let first = newClient(store)
        _ = try await checked(store, first)
        let live = store.counts.samples
        let moved = InMemoryAPIClient(uploader: first.uploader, user: "second")
        let bytes = store.counts.bytes
        let dry = try await checked(store, moved, full: true, dryRun: true)
        #expect(dry.reconciles.first?.newDestination == true && dry.reconciles.first?.samplesMissing == live && !dry.provenEqual)
        #expect(store.counts.bytes == bytes && moved.records.isEmpty, "a dry run writes and sends nothing")
        let result = try await checked(store, moved)
        #expect(result.upload.samplesSynced == live && result.provenEqual && moved.live.count == live)
        #expect(store.destinations.map(\.user) == ["local", "second"] && store.destination?.user == "second")
    }

    @Test func storesAndServersFromBeforeUploadersAreCheckedOnce() async throws {
        // A store acknowledged by a server that recorded no uploader: the first checked upload sends
        // every sample once (the server records the uploader, writes no new version), then it is in sync.
        let (dir, store) = try await ingestedStore(days: 5)
        defer { withExtendedLifetime(dir) {} }
        let old = InMemoryAPIClient()
        try await uploadService(store, old).syncAll()
        #expect(store.destination == nil && store.counts.unsyncedSamples == 0)
        let server = old.sharing(uploader: CheckedUpload.uploader(of: store).uuidString)
        let versions = old.records.count
        let result = try await checked(store, server)
        #expect(result.provenEqual && result.upload.samplesSynced == store.counts.samples && result.upload.samplesSavedByServer == 0)
        #expect(old.records.count == versions && server.held.values.allSatisfy { $0.uploader == server.uploader })
        #expect(try await checked(store, server).reconciles.isEmpty)
    }
}
