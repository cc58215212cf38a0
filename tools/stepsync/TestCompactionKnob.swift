import Foundation
import StepLog
import ToolSupport

/// A test-only knob (kill tests of real processes during a background
/// compaction, Tests/StepSyncTests/CompactionKillTests.swift): with
/// `STEPSYNC_TEST_COMPACTION=BYTES` in the environment, the stores that
/// `stepsync ingest` and `stepsync upload` write compact in the background
/// once BYTES are dead (whatever fraction), their segments roll at
/// `STEPSYNC_TEST_SEGMENT_SIZE` bytes when given (each seal checks the
/// trigger), and each compaction step is printed on stderr as
/// `stepsync: compaction <step>` (`CompactionStep`), so a test can kill the
/// process at a chosen step; before closing its store, the command waits for
/// a compaction still running (`finish`), so that every step is reached
/// whatever the machine's speed (closing would abandon the copy at its next
/// step). Unset, nothing changes.
enum TestCompactionKnob {
    static let deadBytesVariable = "STEPSYNC_TEST_COMPACTION"
    static let segmentSizeVariable = "STEPSYNC_TEST_SEGMENT_SIZE"

    /// `options` with the knob applied, when its variable is set.
    static func apply(to options: StoreOptions, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> StoreOptions {
        guard let text = environment[deadBytesVariable] else { return options }
        var options = options
        guard let dead = Int64(text), dead > 0 else {
            throw Arguments.UsageError("\(deadBytesVariable) must be a positive number of bytes, found '\(text)'")
        }
        options.compactionDeadBytes = dead
        options.compactionDeadFraction = 0
        if let size = environment[segmentSizeVariable] {
            guard let bytes = Int(size), bytes >= 64 << 10 else {
                throw Arguments.UsageError("\(segmentSizeVariable) must be at least 65536 bytes, found '\(size)'")
            }
            options.segmentSize = bytes
        }
        options.onBackgroundCompactionStep = { step in
            FileHandle.standardError.write(Data("stepsync: compaction \(step)\n".utf8))
        }
        return options
    }

    /// Waits for a background compaction still running when the knob is set
    /// (a command about to close its store); otherwise returns at once.
    static func finish(_ store: StepLogStore, environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard environment[deadBytesVariable] != nil else { return }
        store.waitForBackgroundCompaction()
    }
}
