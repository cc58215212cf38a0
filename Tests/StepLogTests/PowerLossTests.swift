import Foundation
import Testing
@testable import StepLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Power loss and I/O errors, through the recording I/O seam and the crash
/// checker (Tests/Support/Crash): issue #19's three reproductions, a bounded
/// run of every workload under both models, and error injection. The large
/// runs are `tools/crashcheck`. Serialized: the seam is process-wide.
@Suite(.serialized) struct PowerLossTests {
    /// Runs `workload` with one fault, re-runs it without, and checks the
    /// power-loss states at the end: returns (first run threw, report).
    private func faultThenRerun(_ workload: CrashWorkload, _ fault: IORecorder.Fault, model: CrashModel,
                                tmp: TemporaryDirectory) throws -> (failed: Bool, injected: Int, report: CrashChecker.Report) {
        let dir = tmp.sub("store")
        let log = ExpectationLog()
        try workload.prepare(dir, log: log)
        let recorder = IORecorder(root: dir, acknowledged: log.lastMark)
        recorder.setFault(fault)
        recorder.install()
        defer { recorder.uninstall() }
        var failed = false
        do { try workload.run(dir, log: log) { recorder.acknowledge($0) } } catch { failed = true }
        recorder.setFault(nil)
        try workload.run(dir, log: log) { recorder.acknowledge($0) }
        recorder.uninstall()
        var checker = CrashChecker(workload: workload, model: model)
        checker.variants = .small
        checker.onlyCrashPoints = [] // the end: everything acknowledged, nothing unsynced left
        return (failed, recorder.injectedCount, checker.check(recorder, log: log, scratch: tmp.sub("states")))
    }

    /// #19.1: the preallocator's fill syncs the writer's file; when that sync
    /// fails, the writer's next sync returns 0 (the error was reported once)
    /// though its pages were dropped. Before the fix the batch was
    /// acknowledged and lost at the power loss.
    @Test func aFailedPreallocationSyncFailsTheWriter() throws {
        var workload = CrashWorkload(.ingest, scale: 2)
        workload.options.preallocationSize = 8 << 10
        workload.options.writeBufferSize = 256 // records reach the file as they come: data is dirty while fills run
        for model in CrashModel.allCases {
            let tmp = CrashHarness.scratch("power-loss")
            let (failed, injected, report) = try faultThenRerun(workload, IORecorder.Fault(first: .preallocationSync), model: model, tmp: tmp)
            #expect(injected == 1, "the fault never hit a preallocation sync")
            #expect(failed, "the run went on after its preallocation sync failed")
            #expect(report.statesChecked > 0)
            #expect(report.failures == 0, "\(report) \(report.examples)")
        }
    }

    /// #19.2 (fsyncgate across runs): the writer's sync fails, the run
    /// stops; the next run reads the dropped bytes back from the page cache,
    /// finds its re-upserts "unchanged" and acknowledges them. Before the fix
    /// nothing re-wrote those bytes and the power loss took them.
    @Test func bytesAFailedSyncDroppedAreWrittenAgainByTheNextRun() throws {
        for model in CrashModel.allCases {
            let tmp = CrashHarness.scratch("power-loss")
            let (failed, injected, report) = try faultThenRerun(CrashWorkload(.ingest), IORecorder.Fault(first: .writerSync),
                                                                model: model, tmp: tmp)
            #expect(injected == 1 && failed)
            #expect(report.statesChecked > 0)
            #expect(report.failures == 0, "\(report) \(report.examples)")
        }
    }

    /// #19.3: the directory sync after a segment is renamed into place
    /// fails; the next run writes and syncs the segment but, before the fix,
    /// never the directory, so a power loss (strict model: names persist
    /// only through a directory sync) lost the segment and everything in it.
    @Test func aWriterSyncsTheDirectoryWhenItOpens() throws {
        let tmp = CrashHarness.scratch("power-loss")
        let (failed, injected, report) = try faultThenRerun(CrashWorkload(.ingest), IORecorder.Fault(first: .directorySyncAfterSegmentRename),
                                                            model: .strict, tmp: tmp)
        #expect(injected == 1 && failed)
        #expect(report.statesChecked > 0)
        #expect(report.failures == 0, "\(report) \(report.examples)")
    }

    /// #19.1, the snapshot's part: an index snapshot's failed sync fails
    /// the writer (the device lost writes): the run reports it, the next run
    /// rebuilds the snapshot, and a power loss after it loses nothing.
    @Test func aFailedSnapshotSyncFailsTheWriter() throws {
        let tmp = CrashHarness.scratch("power-loss")
        let (failed, injected, report) = try faultThenRerun(CrashWorkload(.manySegments), IORecorder.Fault(first: .snapshotSync),
                                                            model: .ext4, tmp: tmp)
        #expect(injected == 1 && failed)
        #expect(report.statesChecked > 0)
        #expect(report.failures == 0, "\(report) \(report.examples)")
    }

    /// A bounded checker run: every workload, both models, a crash point
    /// after every operation, small variants.
    @Test(arguments: CrashWorkload.Kind.allCases)
    func everyPowerLossStateOpensWithEverythingAcknowledged(_ kind: CrashWorkload.Kind) throws {
        let tmp = CrashHarness.scratch("power-loss")
        let workload = CrashWorkload(kind)
        let (recorder, log) = try CrashHarness.record(workload, directory: tmp.sub("store"))
        for model in CrashModel.allCases {
            var checker = CrashChecker(workload: workload, model: model)
            checker.variants = .small
            checker.stride = 1
            let report = checker.check(recorder, log: log, scratch: tmp.sub("states-\(model)"))
            print("power loss: \(report)")
            #expect(report.statesChecked > 10)
            #expect(report.failures == 0, "\(report) \(report.examples)")
        }
    }

    /// Error injection at every operation of the ingest and of upload's
    /// acknowledgements (at spread positions of the others): EIO and ENOSPC,
    /// once and persistent; each followed by a re-run and a power loss.
    @Test(arguments: CrashWorkload.Kind.allCases)
    func injectedErrorsLoseNothingAcknowledged(_ kind: CrashWorkload.Kind) throws {
        let tmp = CrashHarness.scratch("power-loss")
        let workload = CrashWorkload(kind)
        let operations = try CrashHarness.operationCount(workload, scratch: tmp.path)
        let stride = kind == .ingest || kind == .upload || kind == .reconcile ? 1 : max(1, operations / 15)
        let faults = CrashHarness.faults(operations: operations, stride: stride)
        let report = CrashHarness.inject(workload, faults: faults, model: kind == .upload || kind == .reconcile ? .strict : .ext4, scratch: tmp.path)
        print("error injection: \(report)")
        #expect(report.failedRuns > 0)
        #expect(report.rerunsFailed == 0 && report.badDiskFullMessages == 0 && report.failedStates == 0,
                "\(report) \(report.examples)")
    }

    /// ENOSPC on a write: one line naming the path, "disk full" first; the
    /// store refuses further writes until reopened, and opens afterwards with
    /// everything acknowledged.
    @Test func aFullDiskSaysSoInOneLine() throws {
        let tmp = CrashHarness.scratch("power-loss")
        let dir = tmp.sub("store")
        var options = StoreOptions()
        options.preallocationSize = 0
        let store = try StepLogStore.open(dir, options: options)
        _ = try store.upsert([makeSample(1)], fetchedAt: Date())
        try store.sync()
        let recorder = IORecorder(root: dir, acknowledged: nil)
        recorder.setFault(IORecorder.Fault(at: 1, errno: ENOSPC, persistent: true))
        recorder.install()
        _ = try store.upsert([makeSample(2)], fetchedAt: Date())
        var message = ""
        do { try store.sync() } catch { message = "\(error)" }
        recorder.uninstall()
        #expect(message.hasPrefix("disk full: write \(dir)/"), "\(message)")
        #expect(!message.contains("\n"))
        #expect(throws: StepLogError.self) { _ = try store.upsert([makeSample(3)], fetchedAt: Date()) }
        try? store.close()
        let again = try StepLogStore.open(dir, options: options)
        #expect(try again.sample(id: makeSample(1).id) != nil)
        _ = try again.upsert([makeSample(3)], fetchedAt: Date())
        try again.sync()
        try again.close()
    }
}
