import Foundation
import Testing
@testable import StepLog

/// Tombstones (#12 part 1): delete, revive, acknowledge, relabel, anchors,
/// and what reopening and compaction keep of them.
@Suite struct DeletionTests {
    let t1 = Date(timeIntervalSince1970: 1_000), t2 = Date(timeIntervalSince1970: 2_000)

    func verifyOK(_ dir: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try StoreVerifier.verify(directory: dir)
        #expect(result.problems.isEmpty, "\(result.problems)", sourceLocation: sourceLocation)
    }

    @Test func deleteLiveDeletedAndUnknown() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert((0..<5).map { makeSample($0) }, fetchedAt: t1)
        try store.markSynced(try store.unsyncedSamples(limit: 2)) // 0 and 1 synced
        let summary = try store.delete([.test(0), .test(3), .test(3), .test(99)], at: t2)
        #expect(summary == DeleteSummary(deleted: 2, alreadyDeleted: 1, unknown: 1))
        #expect(store.counts.samples == 3 && store.counts.pendingDeletions == 2)
        #expect(store.counts.syncedSamples == 1 && store.counts.unsyncedSamples == 2)
        #expect(try store.sample(id: .test(0)) == nil)
        let pending = try store.pendingDeletions(limit: 10)
        #expect(pending.map(\.id) == [.test(0), .test(3)])
        #expect(pending.allSatisfy { $0.deletedAtMilliseconds == 2_000_000 && $0.deletedAt == t2 })
        #expect(try store.sampleState(id: .test(3)) == .deletionPending(pending[1]))
        #expect(try store.sampleState(id: .test(99)) == .absent)
        guard case .live(let live) = try store.sampleState(id: .test(1)) else { Issue.record("sample 1 is not live"); return }
        #expect(live.sample == makeSample(1) && live.isSynced)
        // Deleted samples are not samples: not exported, not uploaded.
        var seen: [UUID] = []
        try store.forEachSample { seen.append($0.id) }
        #expect(seen == [.test(1), .test(2), .test(4)])
        #expect(try store.unsyncedSamples(limit: 10).map(\.id) == [.test(2), .test(4)])
        // Deleting what is already deleted, or unknown, writes nothing.
        let bytes = store.counts.bytes
        #expect(try store.delete([.test(0), .test(1_000), UUID.nil], at: t2) == DeleteSummary(alreadyDeleted: 1, unknown: 2))
        #expect(store.counts.bytes == bytes)
        // The nil UUID marks the index's empty slots: it is never a sample.
        #expect(try store.sampleState(id: .nil) == .absent && store.sample(id: .nil) == nil)
        try store.close()
        try verifyOK(tmp.path)
    }

    @Test func upsertAfterDeleteRevivesUnsynced() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert([makeSample(1), makeSample(2)], fetchedAt: t1)
        try store.markSynced(try store.unsyncedSamples(limit: 10))
        try store.delete([.test(1), .test(2)], at: t2)
        // The same content as before the deletion is still a revival: the server
        // will have deleted it.
        #expect(try store.upsert([makeSample(1)], fetchedAt: t2) == UpsertSummary(revived: 1))
        #expect(store.counts.samples == 1 && store.counts.unsyncedSamples == 1 && store.counts.pendingDeletions == 1)
        #expect(try store.sample(id: .test(1))?.isSynced == false)
        #expect(try store.pendingDeletions(limit: 10).map(\.id) == [.test(2)])
        try store.close()
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.counts.samples == 1 && reopened.counts.pendingDeletions == 1 && reopened.counts.unsyncedSamples == 1)
    }

    @Test func acknowledgingADeletionRemovesTheSampleEntirely() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert((0..<4).map { makeSample($0) }, fetchedAt: t1)
        try store.delete((0..<4).map { UUID.test($0) }, at: t2)
        let read = try store.pendingDeletions(limit: 10)
        // Meanwhile 1 is revived and 2 revived and deleted again: their
        // tombstones are not the ones read, so they stay (1 live, 2 pending).
        try store.upsert([makeSample(1), makeSample(2)], fetchedAt: t2)
        try store.delete([.test(2)], at: t2)
        #expect(try store.markDeletionsAcknowledged(read + read) == 2) // 0 and 3, once each
        #expect(try store.sampleState(id: .test(0)) == .absent && store.sampleState(id: .test(3)) == .absent)
        guard case .live = try store.sampleState(id: .test(1)) else { Issue.record("1 should be live"); return }
        let stillPending = try store.pendingDeletions(limit: 10)
        #expect(stillPending.map(\.id) == [.test(2)] && stillPending[0].position != read[2].position)
        #expect(store.counts.pendingDeletions == 1 && store.counts.samples == 1)
        // Acknowledging again changes nothing; asking again returns what is left.
        #expect(try store.markDeletionsAcknowledged(read) == 0)
        // An acknowledged UUID is new again if it comes back.
        #expect(try store.upsert([makeSample(0)], fetchedAt: t2) == UpsertSummary(inserted: 1))
        #expect(try store.delete([.test(3)], at: t2) == DeleteSummary(unknown: 1))
        try store.close()
        try verifyOK(tmp.path)
        let reopened = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(reopened.counts.samples == 2 && reopened.counts.pendingDeletions == 1)
        #expect(try reopened.pendingDeletions(limit: 10) == stillPending)
    }

    @Test func pendingDeletionsComeInLogOrderInBatches() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path, options: StoreOptions(segmentSize: 8 << 10))
        try store.upsert((0..<500).map { makeSample($0) }, fetchedAt: t1)
        let order = (0..<500).map { UInt64(($0 * 7) % 500) }
        for chunk in stride(from: 0, to: 500, by: 50) {
            try store.delete(order[chunk..<(chunk + 50)].map { UUID.test($0) }, at: t2)
            try store.sync()
        }
        #expect(segmentFiles(tmp.path).count > 3)
        var seen: [UUID] = []
        var after: LogPosition?
        while true {
            let batch = try store.pendingDeletions(limit: 64, after: after)
            if batch.isEmpty { break }
            seen += batch.map(\.id)
            after = batch.last!.position
        }
        #expect(seen == order.map { UUID.test($0) })
        while true {
            let batch = try store.pendingDeletions(limit: 64)
            if batch.isEmpty { break }
            #expect(try store.pendingDeletions(limit: 64) == batch, "asking again before acknowledging returns the same batch")
            #expect(try store.markDeletionsAcknowledged(batch) == batch.count)
        }
        #expect(store.counts.pendingDeletions == 0 && store.counts.samples == 0)
        try store.close()
        try verifyOK(tmp.path)
    }

    @Test func aChangedOriginRelabelsAndKeepsTheSyncedState() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert([makeSample(1, origin: .mock), makeSample(2, origin: .mock)], fetchedAt: t1)
        try store.markSynced(try store.unsyncedSamples(limit: 1)) // 1 synced, 2 not
        let bytes = store.counts.bytes
        #expect(try store.upsert([makeSample(1, origin: .mock)], fetchedAt: t2) == UpsertSummary(unchanged: 1))
        #expect(store.counts.bytes == bytes)
        #expect(try store.upsert([makeSample(1, origin: .export), makeSample(2, origin: .live)], fetchedAt: t2) == UpsertSummary(relabeled: 2))
        #expect(store.counts.bytes > bytes)
        #expect(try store.sample(id: .test(1))?.sample.origin == .export)
        #expect(try store.sample(id: .test(1))?.isSynced == true)
        #expect(try store.sample(id: .test(2))?.isSynced == false)
        #expect(try store.unsyncedSamples(limit: 10).map(\.id) == [.test(2)])
        try store.close()
        let reopened = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(try reopened.sample(id: .test(1))?.isSynced == true)
        #expect(try reopened.sample(id: .test(2))?.sample.origin == .live)
        // A change of content is a change, whatever the origin does.
        var changed = makeSample(1, origin: .mock)
        changed.count += 1
        #expect(try reopened.upsert([changed], fetchedAt: t2) == UpsertSummary(updated: 1))
    }

    @Test func sourceAnchorsLatestPerFamily() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        #expect(store.sourceAnchor(family: "export") == nil)
        try store.recordSourceAnchor(family: "export", anchor: Array("2024-01-01".utf8))
        try store.recordSourceAnchor(family: "healthkit", anchor: [0, 1, 2])
        try store.recordSourceAnchor(family: "export", anchor: Array("2024-02-01".utf8))
        #expect(store.sourceAnchor(family: "export") == Array("2024-02-01".utf8))
        #expect(throws: StepLogError.anchorTooLarge(family: "x", bytes: 65_537)) {
            try store.recordSourceAnchor(family: "x", anchor: [UInt8](repeating: 1, count: 65_537))
        }
        try store.recordSourceAnchor(family: "big", anchor: [UInt8](repeating: 1, count: 65_536))
        try store.close()
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.sourceAnchor(family: "export") == Array("2024-02-01".utf8))
        #expect(reopened.sourceAnchor(family: "healthkit") == [0, 1, 2])
        #expect(reopened.sourceAnchor(family: "big")?.count == 65_536)
    }
}

/// Compaction with tombstones: a pending deletion survives as its tombstone,
/// an acknowledged one leaves nothing behind, and the store means the same
/// before and after (#12's compaction tests).
@Suite struct DeletionCompactionTests {
    let t1 = Date(timeIntervalSince1970: 1_000), t2 = Date(timeIntervalSince1970: 2_000)

    @Test func pendingTombstonesSurviveAndAcknowledgedDeletionsLeaveNothing() throws {
        let tmp = TemporaryDirectory()
        let options = StoreOptions(segmentSize: 16 << 10)
        do {
            let store = try StepLogStore.open(tmp.path, options: options)
            try store.upsert((0..<400).map { makeSample($0) }, fetchedAt: t1)
            try store.sync()
            try store.markSynced(try store.unsyncedSamples(limit: 300))
            try store.delete((0..<100).map { UUID.test($0) }, at: t2)         // deleted, to be acknowledged
            try store.delete((100..<150).map { UUID.test($0) }, at: t2)       // deleted, left pending
            try store.upsert((90..<95).map { makeSample($0, count: 7) }, fetchedAt: t2) // revived before acknowledgement
            try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: 95))
            try store.recordSourceAnchor(family: "export", anchor: [1])
            try store.recordSourceAnchor(family: "export", anchor: [2])
            try store.close()
        }
        let before = try StoreDigest.of(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly))
        #expect(before.deletions.count == 50 && before.samples.count == 255 && before.anchors.count == 1)
        let report = try StepLogStore.compact(directory: tmp.path, options: options)
        #expect(report.after.deadBytes == 0)
        let after = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(try StoreDigest.of(after) == before)
        #expect(after.counts.pendingDeletions == 50)
        try after.close()
        // What is on disk: the 50 pending tombstones, no acknowledgement, and
        // not one record of the 95 acknowledged deletions' UUIDs.
        let records = try readAllRecords(tmp.path)
        let acknowledged = Set((0..<90).map { UUID.test($0) } + (95..<100).map { UUID.test($0) })
        var tombstones = 0
        for r in records {
            switch r.record {
            case .sampleDeleted(let id, _):
                tombstones += 1
                #expect((100..<150).map { UUID.test($0) }.contains(id))
            case .sampleUpsert(let s): #expect(!acknowledged.contains(s.sample.id))
            case .samplesAcknowledged: Issue.record("an acknowledgement survived compaction")
            case .sourceAnchor(_, let anchor): #expect(anchor == [2])
            default: break
            }
        }
        #expect(tombstones == 50)
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
        // Acknowledging the rest and compacting again leaves no tombstone at all,
        // and opening from the new snapshots agrees.
        do {
            let store = try StepLogStore.open(tmp.path, options: options)
            try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: 1_000))
            try store.close()
        }
        _ = try StepLogStore.compact(directory: tmp.path, options: options)
        #expect(!(try readAllRecords(tmp.path)).contains { if case .sampleDeleted = $0.record { return true }; return false })
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.counts.pendingDeletions == 0 && reopened.counts.samples == 255)
        #expect(reopened.openReport.segmentsFromSnapshots == reopened.segmentInfos.count - 1)
        var expected = before
        expected.deletions = []
        #expect(try StoreDigest.of(reopened) == expected)
        try reopened.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }
}
