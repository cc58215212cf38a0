import Foundation
import Testing
@testable import StepLog

/// Samples the server rejected (record type 11): kept in the store, left out
/// of the upload until their content changes, and what reopening (with and
/// without index snapshots) and compaction keep of them.
@Suite struct RejectionTests {
    let t1 = Date(timeIntervalSince1970: 1_000), t2 = Date(timeIntervalSince1970: 2_000)

    func verifyOK(_ dir: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try StoreVerifier.verify(directory: dir)
        #expect(result.problems.isEmpty, "\(result.problems)", sourceLocation: sourceLocation)
    }

    func rejectedReasons(_ store: StepLogStore) throws -> [UUID: String] {
        Dictionary(uniqueKeysWithValues: try store.rejectedSamples().map { ($0.sample.id, $0.rejection.reason) })
    }

    @Test func aRejectedSampleIsKeptCountedAndNotSentUntilItChanges() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert((0..<6).map { makeSample($0) }, fetchedAt: t1)
        let batch = try store.unsyncedSamples(limit: 6)
        #expect(try store.markRejected([(batch[1], "count: must be at most 1000000 (got 2000000)"), (batch[4], "endDate: before startDate")], at: t2) == 2)
        try store.markSynced([batch[0], batch[2]])
        let counts = store.counts
        #expect(counts.samples == 6 && counts.syncedSamples == 2 && counts.unsyncedSamples == 2 && counts.rejectedSamples == 2)
        #expect(try store.unsyncedSamples(limit: 10).map(\.id) == [.test(3), .test(5)])
        #expect(try store.firstUnsyncedPosition() == batch[3].position)
        #expect(try rejectedReasons(store) == [.test(1): "count: must be at most 1000000 (got 2000000)", .test(4): "endDate: before startDate"])
        let first = try #require(try store.rejectedSamples().first)
        #expect(first.rejection.rejectedAt == t2 && first.sample.sample == makeSample(1))
        // An identical re-upsert writes nothing and keeps the rejection.
        try store.upsert([makeSample(1)], fetchedAt: t2)
        #expect(store.counts.rejectedSamples == 2)
        // Changed content is a new version: sent again.
        try store.upsert([makeSample(1, count: 7)], fetchedAt: t2)
        #expect(store.counts.rejectedSamples == 1 && store.counts.unsyncedSamples == 3)
        #expect(try store.unsyncedSamples(limit: 10).map(\.id) == [.test(3), .test(5), .test(1)])
        // A deletion ends the rejection too; a revival is a new version.
        try store.delete([.test(4)], at: t2)
        #expect(store.counts.rejectedSamples == 0 && store.counts.pendingDeletions == 1)
        try store.upsert([makeSample(4)], fetchedAt: t2)
        #expect(store.counts.rejectedSamples == 0)
        #expect(try store.unsyncedSamples(limit: 10).map(\.id).last == .test(4))
        try store.close()
        try verifyOK(tmp.path)
    }

    @Test func aVersionChangedSinceItWasReadIsNotRejected() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert([makeSample(0), makeSample(1)], fetchedAt: t1)
        let read = try store.unsyncedSamples(limit: 2)
        try store.upsert([makeSample(0, count: 1)], fetchedAt: t2)
        try store.markSynced([read[1]])
        #expect(try store.markRejected([(read[0], "changed since"), (read[1], "synced since")], at: t2) == 0)
        #expect(store.counts.rejectedSamples == 0)
        let bytes = store.counts.bytes
        #expect(try store.markRejected([], at: t2) == 0 && store.counts.bytes == bytes) // nothing to record writes nothing
    }

    @Test func reopeningWithAndWithoutSnapshotsKeepsRejections() throws {
        let tmp = TemporaryDirectory()
        var options = StoreOptions(segmentSize: 16 << 10)
        let store = try StepLogStore.open(tmp.path, options: options)
        // Enough samples for several sealed segments (each gets an index snapshot).
        for k in 0..<20 { try store.upsert((0..<100).map { makeSample(UInt64(k * 100 + $0)) }, fetchedAt: t1) }
        let unsynced = try store.unsyncedSamples(limit: 2_000)
        try store.markRejected(unsynced.prefix(3).map { ($0, "refused \($0.id)") }, at: t2)
        try store.markSynced(unsynced[3...])
        for k in 20..<40 { try store.upsert((0..<100).map { makeSample(UInt64(k * 100 + $0)) }, fetchedAt: t1) }
        try store.sync()
        let expected = try rejectedReasons(store)
        #expect(expected.count == 3)
        try store.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp.path).contains { $0.hasSuffix(".hint") })
        for useSnapshots in [true, false] {
            options.useSnapshots = useSnapshots
            let reopened = try StepLogStore.open(tmp.path, options: options)
            #expect(try rejectedReasons(reopened) == expected)
            #expect(reopened.counts.rejectedSamples == 3 && reopened.counts.unsyncedSamples == 2_000)
            try reopened.close()
        }
        try verifyOK(tmp.path)
    }

    @Test func compactionKeepsARejectionWhileItsVersionIsCurrentAndDropsItAfter() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert((0..<4).map { makeSample($0) }, fetchedAt: t1)
        let batch = try store.unsyncedSamples(limit: 4)
        try store.markRejected([(batch[0], "reason zero"), (batch[1], "reason one")], at: t2)
        try store.markSynced([batch[3]])
        // Sample 1 changes: its entry of the record no longer applies; sample 0's does.
        try store.upsert([makeSample(1, count: 99)], fetchedAt: t2)
        try store.close()

        _ = try StepLogStore.compact(directory: tmp.path)
        try verifyOK(tmp.path)
        let compacted = try StepLogStore.open(tmp.path)
        #expect(try rejectedReasons(compacted) == [.test(0): "reason zero"])
        #expect(compacted.counts.rejectedSamples == 1 && compacted.counts.unsyncedSamples == 2 && compacted.counts.syncedSamples == 1)
        #expect(try compacted.unsyncedSamples(limit: 10).map(\.id) == [.test(2), .test(1)])
        // The record was rewritten with the entry that still applies only.
        let records = try readAllRecords(tmp.path).map(\.record).compactMap { r -> [SampleRejection]? in
            if case .samplesRejected(let list) = r { return list }
            return nil
        }
        #expect(records.map { $0.map(\.id) } == [[.test(0)]])
        // Once sample 0 changes too, the next compaction drops the record.
        try compacted.upsert([makeSample(0, count: 5)], fetchedAt: t2)
        try compacted.close()
        _ = try StepLogStore.compact(directory: tmp.path)
        try verifyOK(tmp.path)
        #expect(try readAllRecords(tmp.path).allSatisfy { $0.record.type != .samplesRejected })
        let again = try StepLogStore.open(tmp.path)
        #expect(again.counts.rejectedSamples == 0 && again.counts.unsyncedSamples == 3)
    }

    @Test func aReasonOfInvalidUTF8BeforeACombiningMarkDecodesRepairedAndThenRoundTrips() throws {
        // The fuzzer's reproducer (Tests/Fuzz/corpus/record/regression-replacement-then-combining-mark):
        // the byte 0xF2 cannot start a scalar there, and the U+0734 after it
        // (a combining mark) joins its replacement character into one Character.
        let reasonBytes = Array("rejected: start is i".utf8) + [0, 0, 0x7B, 0xF2, 0xDC, 0xB4, 0x22] + Array("Jture".utf8)
        let buffer = WriteBuffer()
        buffer.append(UInt32(1))
        buffer.append(UUIDBytes(UUID.test(7)))
        buffer.append(Int64(1_700_000_000_000))
        buffer.append(UInt16(reasonBytes.count))
        buffer.append(reasonBytes)
        let decoded = try RejectionPayload.checked(buffer.bytes).get().rejections
        let reason = try #require(decoded.first?.reason)
        #expect(reason.unicodeScalars.contains("\u{FFFD}"))
        #expect(reason.unicodeScalars.contains("\u{0734}"))
        #expect(!reason.contains("\u{FFFD}"), "the replacement character is not a Character of its own here")
        #expect(Array(reason.utf8) != reasonBytes)
        // Once repaired, the reason re-encodes and decodes to itself.
        let again = WriteBuffer()
        RejectionPayload.append(decoded, to: again)
        guard case .record(let type, let payload, _) = RecordFrame.decode(again.bytes, at: 0) else { Issue.record("no record"); return }
        #expect(try LogRecord.decode(type: type, payload: payload).get() == .samplesRejected(decoded))
    }
}
