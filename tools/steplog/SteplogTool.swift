import Foundation
import StepLog
import StepSync
import ToolSupport

/// Dispatch and error rendering for `steplog`. Exit codes: 0 ok, 1 failure
/// (or problems found), 2 usage error.
enum SteplogTool {
    static let usage = """
        usage: steplog <command> DIR [options]

        commands:
          verify    check every record, snapshot and index invariant (read-only; works on a damaged store)
          stats     segments, bytes, live and dead records by type, samples, pending deletions, intervals
          dump      every record with its offset, for debugging
          recover   keep everything before damage, set the rest aside in a file next to the store
          compact   rewrite only what is live, then switch to it atomically

        Run 'steplog <command> --help' (or 'steplog help <command>') for a command's options,
        'steplog --version' for the version.
        """

    /// Runs `steplog` with `arguments`, results to `out`, progress and
    /// errors to `err`; returns the exit code. (main.swift gives the process's
    /// stdout and stderr; the tests run it in their own process, capturing.)
    static func run(_ arguments: [String], out: OutputSink = .standardOutput, err: OutputSink = .standardError) async -> Int32 {
        await CommandLineTool(name: "steplog", usage: usage).run(arguments, commands: [
            "verify": { try VerifyCommand.run($0, out: out) },
            "stats": { try StatsCommand.run($0, out: out) },
            "dump": { try DumpCommand.run($0, out: out) },
            "recover": { try RecoverCommand.run($0, out: out) },
            "compact": { try CompactCommand.run($0, out: out, err: err) },
        ], out: out, err: err)
    }

    /// Parses `DIR` plus options, or prints `usage` to `out` for --help (returns nil).
    static func parse(_ arguments: [String], usage: String, out: OutputSink, options: Set<String> = [],
                      flags: Set<String> = []) throws -> (String, Arguments)? {
        if arguments.contains("--help") || arguments.contains("-h") {
            out.line(usage)
            return nil
        }
        let args = try Arguments(arguments, options: options, flags: flags)
        try args.expectPositionals(1, "DIR (the store directory)")
        return (args.positionals[0], args)
    }

    static func openReadOnly(_ path: String) throws -> StepLogStore {
        try StepLogStore.open(path, options: StoreOptions(readOnly: true, createIfMissing: false))
    }

    /// The size and liveness fields of `figures` into the open JSON object
    /// (shared by stats and compact's before/after, so they always agree).
    static func writeFigures(_ figures: StoreFigures, to w: inout JSONWriter) {
        w.field("segments", figures.segments)
        w.field("bytes", figures.bytes)
        w.field("liveBytes", figures.liveBytes)
        w.field("deadBytes", figures.deadBytes)
        w.field("headerBytes", figures.headerBytes)
        w.field("syncMarkBytes", figures.syncMarkBytes)
        w.field("records", figures.records)
        w.field("liveRecords", figures.liveRecords)
    }

    static func typeName(_ t: RecordType) -> String {
        switch t {
        case .sampleUpsert: "sampleUpsert"
        case .samplesAcknowledged: "samplesAcknowledged"
        case .intervalStatus: "intervalStatus"
        case .intervalsCleared: "intervalsCleared"
        case .layeringRange: "layeringRange"
        case .dailyHighScore: "dailyHighScore"
        case .sampleDeleted: "sampleDeleted"
        case .syncedThrough: "syncedThrough"
        case .padding: "padding"
        case .sourceAnchor: "sourceAnchor"
        case .destination: "destination"
        case .samplesUnacknowledged: "samplesUnacknowledged"
        case .samplesRejected: "samplesRejected"
        }
    }
}
