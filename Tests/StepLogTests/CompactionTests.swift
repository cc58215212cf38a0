import Foundation
import Testing
@testable import StepLog

/// Compaction: same live contents, no dead bytes, crash-safe at every file operation.
@Suite struct CompactionTests {
    /// A store with plenty of dead records: changed versions, synced markers,
    /// superseded interval statuses, a clear.
    func reference(_ dir: String, segmentSize: Int = 16 << 10) throws -> StoreDigest {
        try writeKnownHistory(dir, segmentSize: segmentSize, batches: 150, seed: 21)
        return try StoreDigest.of(try StepLogStore.open(dir, options: .fullReplayReadOnly))
    }

    func files(_ dir: String) -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted() }

    @Test func compactionKeepsExactlyTheLiveContentsAndDropsTheRest() throws {
        let tmp = TemporaryDirectory()
        let expected = try reference(tmp.path)
        let before = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)
        let oldEnd = before.segmentInfos.last!.endPosition
        let unsynced = before.counts.unsyncedSamples
        let report = try StepLogStore.compact(directory: tmp.path, options: StoreOptions(segmentSize: 16 << 10))
        #expect(report.before.deadBytes > 0)
        #expect(report.after.deadBytes == 0)
        // Folding a synced marker into its sample sets a flag, so live bytes stay the same.
        #expect(report.after.liveBytes == report.before.liveBytes)
        // Besides live records and headers, only the last output's closing
        // synced-through record, after a padding record that puts it on a
        // sector boundary (unless it already was on one).
        let padded = report.after.syncMarkBytes > 17
        #expect(report.after.syncMarkBytes >= 17 && report.after.syncMarkBytes <= 17 + 512 + 8)
        #expect(readFile(segmentFiles(tmp.path).last!).count % 512 == 17, "the closing record starts a sector")
        #expect(report.after.bytes == report.after.liveBytes + report.after.headerBytes + report.after.syncMarkBytes)
        #expect(report.after.records == report.after.liveRecords + (padded ? 2 : 1))

        let after = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(try StoreDigest.of(after) == expected)
        #expect(after.counts.unsyncedSamples == unsynced)
        #expect(after.segmentInfos.first!.basePosition >= oldEnd) // positions keep growing
        let records = try readAllRecords(tmp.path)
        #expect(!records.contains { if case .samplesAcknowledged = $0.record { return true }; return false })
        #expect(!records.contains { if case .intervalsCleared = $0.record { return true }; return false })
        // Synced state is folded into the versions themselves.
        let syncedRecords = records.filter { if case .sampleUpsert(let r) = $0.record { return r.isSynced }; return false }.count
        #expect(syncedRecords == after.counts.syncedSamples)
        // Still a working store: writes go on, and reopening (from snapshots) agrees.
        try after.upsert([makeSample(888_888)], fetchedAt: Date())
        try after.close()
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.openReport.segmentsFromSnapshots == reopened.segmentInfos.count - 1)
        #expect(try reopened.sample(id: .test(888_888)) != nil)
        #expect(!files(tmp.path).contains { $0.hasSuffix(".tmp") })
    }

    @Test func compactingTwiceChangesNothingMore() throws {
        let tmp = TemporaryDirectory()
        let expected = try reference(tmp.path)
        _ = try StepLogStore.compact(directory: tmp.path)
        let second = try StepLogStore.compact(directory: tmp.path)
        #expect(second.before.deadBytes == 0 && second.after.liveBytes == second.before.liveBytes)
        #expect(try StoreDigest.of(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)) == expected)
    }

    /// Every file operation of a compaction, in order, for a given run.
    func steps(outputs: Int, inputs: Int) -> [CompactionStep] {
        [.started] + (0..<outputs).map { .outputWritten($0) } + (0..<(outputs - 1)).map { .outputRenamed($0) }
            + [.finalHeaderWritten, .committed] + (0..<inputs).map { .inputRemoved($0) } + [.finished]
    }

    struct Crash: Error {}

    @Test func aCrashAfterAnyFileOperationLosesNothingAndALaterCompactionFinishes() throws {
        let tmp = TemporaryDirectory()
        let referenceDir = tmp.sub("reference")
        let expected = try reference(referenceDir, segmentSize: 8 << 10)
        let inputs = segmentFiles(referenceDir).count
        // How many outputs a full compaction makes.
        let probe = tmp.sub("probe")
        try copyDirectory(referenceDir, to: probe)
        let full = try StepLogStore.compact(directory: probe, options: StoreOptions(segmentSize: 8 << 10))
        let all = steps(outputs: full.after.segments, inputs: inputs)
        #expect(all.count > 10)
        for step in all {
            let work = tmp.sub("work")
            try copyDirectory(referenceDir, to: work)
            #expect(throws: Crash.self) {
                _ = try StepLogStore.compact(directory: work, options: StoreOptions(segmentSize: 8 << 10), stop: { if $0 == step { throw Crash() } })
            }
            let reopened = try StepLogStore.open(work, options: .fullReplay)
            #expect(try StoreDigest.of(reopened) == expected, "after a crash at '\(step)'")
            let committed = !reopened.openReport.compactionFinished.isEmpty || step == .finished || {
                if case .inputRemoved = step { return true }; return false }()
            if step == .committed { #expect(reopened.openReport.compactionFinished.count == inputs) }
            reopened.waitForSnapshots() // snapshots being built in the background are written as .tmp first
            #expect(!files(work).contains { $0.hasSuffix(".tmp") }, "temporary files survive an open after '\(step)'")
            try reopened.close()
            let again = try StepLogStore.compact(directory: work, options: StoreOptions(segmentSize: 8 << 10))
            #expect(again.after.deadBytes == 0)
            #expect(committed ? again.before.deadBytes == 0 : again.before.deadBytes > 0, "at '\(step)'")
            #expect(try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly)) == expected)
        }
    }

    @Test func anotherWriterMakesCompactionRefuse() throws {
        let tmp = TemporaryDirectory()
        _ = try reference(tmp.path)
        let holder = try StepLogStore.open(tmp.path)
        #expect(throws: StepLogError.locked(path: tmp.path + "/LOCK", pid: getpid())) {
            _ = try StepLogStore.compact(directory: tmp.path)
        }
        try holder.close()
    }
}
