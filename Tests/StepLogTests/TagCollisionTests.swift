import Foundation
import Testing
@testable import StepLog

/// The index keeps a 48-bit tag of each UUID, not the UUID. Here every UUID
/// gets the same tag (a forced hash), so every lookup meets every key's slot
/// and must read records to tell them apart: a store driven through upserts,
/// re-upserts, deletions, acknowledgements, reopening (snapshots and full
/// replay), compaction and background compaction must end exactly as the
/// same store with real tags.
@Suite struct TagCollisionTests {
    private static func colliding() -> StoreOptions {
        var options = StoreOptions(segmentSize: 8 << 10)
        options.compactionDeadBytes = 0 // only the compactions a test starts
        options.indexHash = { _ in 0x0123_4567_89AB_CDEF }
        return options
    }

    private static func plain() -> StoreOptions {
        var options = StoreOptions(segmentSize: 8 << 10)
        options.compactionDeadBytes = 0
        return options
    }

    /// One history, the same for both stores.
    private static func drive(_ store: StepLogStore) throws {
        let n: UInt64 = 300
        for batch in stride(from: 0, to: n, by: 50) {
            try store.upsert((batch..<(batch + 50)).map { makeSample($0) }, fetchedAt: Date(timeIntervalSince1970: 1))
            try store.sync()
        }
        // Unchanged, changed, relabeled.
        let again = try store.upsert((0..<40).map { makeSample($0) }, fetchedAt: Date(timeIntervalSince1970: 2))
        #expect(again == UpsertSummary(unchanged: 40))
        let changed = try store.upsert((40..<80).map { makeSample($0, count: 7) }, fetchedAt: Date(timeIntervalSince1970: 2))
        #expect(changed == UpsertSummary(updated: 40))
        let relabeled = try store.upsert((80..<90).map { makeSample($0, origin: .export) }, fetchedAt: Date(timeIntervalSince1970: 2))
        #expect(relabeled == UpsertSummary(relabeled: 10))
        // Acknowledge the first 120 unsynced, then delete some of everything.
        let batch = try store.unsyncedSamples(limit: 120)
        #expect(try store.markSynced(batch) == 120)
        let deleted = try store.delete((100..<160).map { UUID.test($0) } + [UUID.test(5_000)], at: Date(timeIntervalSince1970: 3))
        #expect(deleted.deleted == 60 && deleted.unknown == 1)
        #expect(try store.delete([UUID.test(100)], at: Date(timeIntervalSince1970: 3)).alreadyDeleted == 1)
        // Revive some, acknowledge some deletions, add new UUIDs after all that.
        let revived = try store.upsert((100..<110).map { makeSample($0, count: 9) }, fetchedAt: Date(timeIntervalSince1970: 4))
        #expect(revived.revived == 10)
        let pending = try store.pendingDeletions(limit: 20)
        #expect(try store.markDeletionsAcknowledged(pending) == 20)
        try store.upsert((n..<(n + 30)).map { makeSample($0) }, fetchedAt: Date(timeIntervalSince1970: 5))
        try store.sync()
        #expect(try store.sample(id: .test(5)) != nil && store.sample(id: .test(150)) == nil && store.sample(id: .test(5_001)) == nil)
    }

    @Test func everyOperationIsExactWhenEveryUUIDSharesOneTag() throws {
        let reference = TemporaryDirectory(), forced = TemporaryDirectory()
        let expected: StoreDigest
        do {
            let store = try StepLogStore.open(reference.path, options: Self.plain())
            try Self.drive(store)
            expected = try StoreDigest.of(store)
            try store.close()
        }
        #expect(expected.samples.count == 300 - 50 + 30 && expected.deletions.count == 30)
        do {
            let store = try StepLogStore.open(forced.path, options: Self.colliding())
            try Self.drive(store)
            #expect(try StoreDigest.of(store) == expected)
            let counts = store.counts, referenceCounts = try StepLogStore.open(reference.path, options: StoreOptions(readOnly: true)).counts
            #expect(counts.samples == referenceCounts.samples && counts.syncedSamples == referenceCounts.syncedSamples)
            #expect(counts.unsyncedSamples == referenceCounts.unsyncedSamples && counts.pendingDeletions == referenceCounts.pendingDeletions)
            try store.close()
        }
        #expect(segmentFiles(forced.path).count > 3, "several sealed segments, so reopening loads snapshots")

        // Reopen from snapshots, then by full replay, both with every tag equal.
        var withSnapshots = Self.colliding()
        withSnapshots.readOnly = true
        let fromSnapshots = try StepLogStore.open(forced.path, options: withSnapshots)
        #expect(fromSnapshots.openReport.segmentsFromSnapshots > 0)
        #expect(try StoreDigest.of(fromSnapshots) == expected)
        // On two threads, each half of the hash range in a lane of the index:
        // the keys of the upper half's bands are all homed in the lower half's
        // slots, so that lane refuses its first and the opening thread applies
        // the rest; the lower lane confirms every match by reading records.
        var twoThreads = withSnapshots
        twoThreads.snapshotParallelEntries = 0
        twoThreads.snapshotBandBytes = 48
        let parallel = try StepLogStore.open(forced.path, options: twoThreads)
        #expect(parallel.openReport.snapshotEntriesInParallel > 0)
        #expect(parallel.openReport.snapshotLaneRefusals >= 1)
        #expect(try StoreDigest.of(parallel) == expected)
        var replay = withSnapshots
        replay.useSnapshots = false
        #expect(try StoreDigest.of(try StepLogStore.open(forced.path, options: replay)) == expected)

        // Compaction rewrites every position; the index still finds each UUID.
        let report = try StepLogStore.compact(directory: forced.path, options: Self.colliding())
        #expect(report.after.liveRecords > 0)
        let compacted = try StepLogStore.open(forced.path, options: Self.colliding())
        #expect(try StoreDigest.of(compacted) == expected)
        // And keeps working: a re-upsert and a deletion after compaction.
        #expect(try compacted.upsert([makeSample(1, count: 3)], fetchedAt: Date()).updated == 1)
        #expect(try compacted.delete([UUID.test(2)], at: Date()).deleted == 1)
        #expect(try compacted.sample(id: .test(1))?.sample.count == 3)
        try compacted.close()
        #expect(try StoreVerifier.verify(directory: forced.path).problems.isEmpty)
    }

    /// What the store is asked between two steps of a background compaction:
    /// an unchanged re-upsert, a changed one, a new sample, a deletion.
    private static func use(_ store: StepLogStore, round: Int) throws {
        let r = UInt64(round)
        try store.upsert([makeSample(r % 40), makeSample(40 + r % 40, count: 11 + round), makeSample(1_000 + r)],
                         fetchedAt: Date(timeIntervalSince1970: 6))
        try store.delete([UUID.test(160 + r)], at: Date(timeIntervalSince1970: 6))
        try store.sync()
    }

    @Test func backgroundCompactionIsExactWhenEveryUUIDSharesOneTag() throws {
        let reference = TemporaryDirectory(), forced = TemporaryDirectory()
        var rounds = 0
        let got: StoreDigest
        do {
            let store = try StepLogStore.open(forced.path, options: Self.colliding())
            try Self.drive(store)
            // Writes between the steps land in the writer's segments, which the
            // switch-over replays into a new index that confirms against them.
            _ = try store.compactInBackground(stop: { _ in try Self.use(store, round: rounds); rounds += 1 })
            #expect(rounds > 3)
            for _ in 0..<3 {
                try Self.use(store, round: rounds) // through the switched-to index
                rounds += 1
            }
            got = try StoreDigest.of(store)
            try store.close()
        }
        let store = try StepLogStore.open(reference.path, options: Self.plain())
        try Self.drive(store)
        for r in 0..<rounds { try Self.use(store, round: r) }
        let expected = try StoreDigest.of(store)
        try store.close()
        #expect(got == expected)
        #expect(try StoreDigest.of(try StepLogStore.open(forced.path, options: Self.colliding())) == expected)
        #expect(try StoreVerifier.verify(directory: forced.path).problems.isEmpty)
    }
}
