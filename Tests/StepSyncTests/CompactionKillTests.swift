import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// `stepsync ingest` SIGKILLed while its store compacts in the background,
/// then run again: the store ends exactly as a run without compaction leaves
/// it (the same export, pending deletions and anchor). The test knob
/// `STEPSYNC_TEST_COMPACTION` (tools/stepsync/TestCompactionKnob.swift)
/// lowers the trigger, rolls small segments, and prints each compaction step:
/// the kill comes on the step's line, no sleep chooses the moment.
@Suite(.serialized) struct CompactionKillTests {
    let stepsync = builtProduct("stepsync")
    static let base = "mock:days=60,end=2026-11-21"
    static let churned = "mock:days=400,end=2026-11-22,churn=0.4"
    static let family = "mock:seed=42"
    static let knob = ["STEPSYNC_TEST_COMPACTION": "1", "STEPSYNC_TEST_SEGMENT_SIZE": "\(1 << 20)"]
    /// Where to kill: each step a compaction passes (`CompactionStep`).
    static let steps = ["started", "output 0 written", "final header written", "committed", "input 0 removed", "finished"]

    func outcome(_ store: String) throws -> KillOutcome {
        try KillOutcome.of(store, stepsync: stepsync, family: Self.family)
    }

    @Test func ingestKilledDuringABackgroundCompactionFinishesAsARunWithoutOne() throws {
        let tmp = TemporaryDirectory()
        let clean = tmp.sub("clean"), base = tmp.sub("base"), store = tmp.sub("killed")
        #expect(try runProgram(stepsync, ["ingest", "--store", clean, "--source", Self.base]).code == 0)
        try FileManager.default.copyItem(atPath: clean, toPath: base)
        #expect(try runProgram(stepsync, ["ingest", "--store", clean, "--source", Self.churned]).code == 0)
        let expected = try outcome(clean)
        #expect(expected.pendingDeletions.count > 1_000)

        var landed: [String] = []
        for step in Self.steps {
            if FileManager.default.fileExists(atPath: store) { try FileManager.default.removeItem(atPath: store) }
            try FileManager.default.copyItem(atPath: base, toPath: store)
            let child = try ChildProcess(stepsync, ["ingest", "--store", store, "--source", Self.churned],
                                         environment: Self.knob, mergeStandardError: true)
            var seen = false
            while let line = child.readLine() {
                if line == "stepsync: compaction \(step)" { seen = true; break }
            }
            child.kill()
            let status = child.wait()
            if seen && status != 0 { landed.append(step) }
            try KillOutcome.readOnly(store).close() // every killed state opens
            // Run again, compacting again, to the end.
            let rerun = try runProgram(stepsync, ["ingest", "--store", store, "--source", Self.churned],
                                       environment: Self.knob, mergeStandardError: true)
            #expect(rerun.code == 0, "\(rerun.lines.suffix(5))")
            #expect(try outcome(store) == expected, "killed at '\(step)'")
        }
        print("ingest killed during a background compaction at: \(landed)")
        // Every step is passed by a compaction that runs to its end; a kill
        // may miss only when the process finished first.
        #expect(landed.count >= Self.steps.count - 1, "\(landed)")
    }

    /// A malformed knob is a usage error naming the variable, before anything is written.
    @Test func aMalformedKnobIsAOneLineUsageError() throws {
        let tmp = TemporaryDirectory()
        let run = try runProgram(stepsync, ["ingest", "--store", tmp.sub("store"), "--source", Self.base],
                                 environment: ["STEPSYNC_TEST_COMPACTION": "lots"], mergeStandardError: true)
        #expect(run.code == 2)
        #expect(run.lines.contains { $0.contains("STEPSYNC_TEST_COMPACTION must be a positive number of bytes, found 'lots'") }, "\(run.lines)")
        #expect(!FileManager.default.fileExists(atPath: tmp.sub("store")))
    }
}
