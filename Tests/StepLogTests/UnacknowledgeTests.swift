import Foundation
import Testing
@testable import StepLog

/// What a reconcile writes (docs/RECONCILE.md): acknowledgements taken back
/// (record type 13, with and without a reason), deletions restored for UUIDs
/// the store no longer holds, and destinations (type 12); and what reopening
/// (by replay and from index snapshots) and compaction keep of them.
@Suite struct UnacknowledgeTests {
    let t1 = Date(timeIntervalSince1970: 1_000), t2 = Date(timeIntervalSince1970: 2_000)

    /// A store of `n` samples in small segments, every one acknowledged.
    func syncedStore(_ dir: String, _ n: Int, options: StoreOptions = StoreOptions(segmentSize: 8 << 10)) throws -> StepLogStore {
        let store = try StepLogStore.open(dir, options: options)
        try store.upsert((0..<n).map { makeSample(UInt64($0)) }, fetchedAt: t1)
        try store.markSynced(try store.unsyncedSamples(limit: n))
        try store.sync()
        return store
    }

    func state(_ store: StepLogStore) throws -> (unsynced: [UUID], rejected: [UUID: String], pending: [UUID]) {
        (try store.unsyncedSamples(limit: .max).map(\.id).sorted { $0.uuidString < $1.uuidString },
         Dictionary(uniqueKeysWithValues: try store.rejectedSamples().map { ($0.sample.id, $0.rejection.reason) }),
         try store.pendingDeletions(limit: .max).map(\.id).sorted { $0.uuidString < $1.uuidString })
    }

    @Test func takenBackAcknowledgementsSurviveReopenSnapshotsAndCompaction() throws {
        let tmp = TemporaryDirectory()
        var store = try syncedStore(tmp.path, 400)
        let some = try [3, 150, 399].map { try #require(try store.sample(id: .test(UInt64($0)))) }
        let held = try #require(try store.sample(id: .test(200)))
        #expect(try store.unacknowledge(some.map { ($0, nil) } + [(held, "written in another version at the server by another uploader (B)")], at: t2) == 4)
        #expect(try store.restoreDeletions([.test(5000), .test(7)], at: t2) == 1) // 7 is live: nothing
        let destination = StoreDestination(serverId: "S", user: "alice", url: "http://127.0.0.1:8000", uploader: .test(1),
                                           recordedAtMilliseconds: 2_000_000, provenEqualAtMilliseconds: 0)
        try store.recordDestination(destination)
        let expected = (unsynced: [UUID.test(3), .test(150), .test(399)].sorted { $0.uuidString < $1.uuidString },
                        rejected: [UUID.test(200): "written in another version at the server by another uploader (B)"],
                        pending: [UUID.test(5000)])
        var expectedSynced = 396
        func check(_ s: StepLogStore, _ what: String) throws {
            let found = try state(s)
            #expect(found.unsynced == expected.unsynced && found.rejected == expected.rejected && found.pending == expected.pending, "\(what)")
            #expect(s.counts.unsyncedSamples == 3 && s.counts.rejectedSamples == 1 && s.counts.syncedSamples == expectedSynced, "\(what)")
            #expect(s.destination == destination && s.destinations == [destination], "\(what)")
        }
        try check(store, "as written")
        // More samples, acknowledged, so that the segment holding the records above is sealed and gets a snapshot.
        try store.upsert((1_000..<1_300).map { makeSample(UInt64($0)) }, fetchedAt: t2)
        try store.markSynced(try store.unsyncedSamples(limit: 400).filter { $0.id.uuidString >= UUID.test(1_000).uuidString })
        #expect(store.counts.unsyncedSamples == 3)
        expectedSynced = 696
        try store.close()
        #expect(segmentFiles(tmp.path).count > 5)
        for useSnapshots in [false, true] {
            var options = StoreOptions.fullReplayReadOnly
            options.useSnapshots = useSnapshots
            let reopened = try StepLogStore.open(tmp.path, options: options)
            try check(reopened, useSnapshots ? "from snapshots" : "by replay")
            #expect(reopened.openReport.segmentsFromSnapshots == (useSnapshots ? segmentFiles(tmp.path).count - 1 : 0))
        }
        // The version 150 was written acknowledged by a compaction before its acknowledgement was taken back.
        _ = try StepLogStore.compact(directory: tmp.path)
        store = try StepLogStore.open(tmp.path)
        try check(store, "after a compaction")
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
        try store.close()
    }

    @Test func aVersionCompactedAsAcknowledgedLosesItsAcknowledgementThroughTheNextCompaction() throws {
        let tmp = TemporaryDirectory()
        var store = try syncedStore(tmp.path, 50)
        try store.close()
        _ = try StepLogStore.compact(directory: tmp.path) // the versions now carry flag bit 1
        store = try StepLogStore.open(tmp.path)
        #expect(try store.unacknowledge([(try #require(try store.sample(id: .test(9))), nil)], at: t2) == 1)
        try store.close()
        _ = try StepLogStore.compact(directory: tmp.path)
        store = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)
        #expect(try store.unsyncedSamples(limit: 10).map(\.id) == [.test(9)])
    }

    @Test func aTakenBackVersionBelowTheUnsyncedScansFloorIsOfferedAgain() throws {
        let tmp = TemporaryDirectory()
        let store = try syncedStore(tmp.path, 20)
        try store.upsert([makeSample(100)], fetchedAt: t2)
        #expect(try store.unsyncedSamples(limit: 5).map(\.id) == [.test(100)]) // the scan's floor rises to it
        try store.unacknowledge([(try #require(try store.sample(id: .test(2))), nil)], at: t2)
        #expect(try store.unsyncedSamples(limit: 5).map(\.id) == [.test(2), .test(100)])
        #expect(try store.firstUnsyncedPosition() == (try store.sample(id: .test(2)))?.position)
    }

    @Test func nothingToTakeBackWritesNothing() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert([makeSample(0), makeSample(1)], fetchedAt: t1)
        let read = try store.unsyncedSamples(limit: 2)
        try store.upsert([makeSample(1, count: 9)], fetchedAt: t1)
        try store.delete([.test(0)], at: t1)
        let bytes = store.counts.bytes
        // Unsynced and not rejected, or changed or deleted since it was read: nothing to record.
        #expect(try store.unacknowledge([(read[0], nil), (read[1], nil)], at: t2) == 0)
        #expect(try store.restoreDeletions([.test(0), .test(1)], at: t2) == 0)
        #expect(store.counts.bytes == bytes)
    }

    @Test func aDestinationTooLongIsRefusedInOneLine() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        let d = StoreDestination(serverId: String(repeating: "s", count: 256), user: "u", url: "", uploader: .test(1),
                                 recordedAtMilliseconds: 0, provenEqualAtMilliseconds: 0)
        #expect(throws: StepLogError.self) { try store.recordDestination(d) }
        do { try store.recordDestination(d) } catch { #expect("\(error)" == "cannot record the destination: server id is longer than 255 bytes") }
        #expect(store.destination == nil)
    }
}
