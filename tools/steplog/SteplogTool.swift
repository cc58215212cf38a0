import Foundation
import StepLog
import ToolSupport

/// Dispatch and error rendering for `steplog`. Exit codes: 0 ok, 1 failure
/// (or problems found), 2 usage error.
enum SteplogTool {
    static let usage = """
        usage: steplog <command> DIR [options]

        commands:
          verify    check every record, snapshot and index invariant (read-only; works on a damaged store)
          stats     segments, bytes, live and dead records by type, samples, intervals
          dump      every record with its offset, for debugging
          recover   keep everything before damage, set the rest aside in a file next to the store
          compact   rewrite only what is live, then switch to it atomically

        Run 'steplog <command> --help' for a command's options.
        """

    static let out = OutputSink.standardOutput
    static let err = OutputSink.standardError

    static func run(_ arguments: [String]) -> Int32 {
        guard let command = arguments.first else {
            err.line(usage)
            return 2
        }
        if ["--help", "-h", "help"].contains(command) {
            out.line(usage)
            return 0
        }
        let rest = Array(arguments.dropFirst())
        do {
            switch command {
            case "verify": return try VerifyCommand.run(rest)
            case "stats": return try StatsCommand.run(rest)
            case "dump": return try DumpCommand.run(rest)
            case "recover": return try RecoverCommand.run(rest)
            case "compact": return try CompactCommand.run(rest)
            default:
                err.line("steplog: unknown command '\(command)'\n" + usage)
                return 2
            }
        } catch let error as Arguments.UsageError {
            err.line("steplog \(command): \(error) (see 'steplog \(command) --help')")
            return 2
        } catch {
            out.flush()
            err.line("steplog \(command): \(error)")
            return 1
        }
    }

    /// Parses `DIR` plus options, or prints `usage` for --help (returns nil).
    static func parse(_ arguments: [String], usage: String, options: Set<String> = [], flags: Set<String> = []) throws -> (String, Arguments)? {
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

    static func typeName(_ t: RecordType) -> String {
        switch t {
        case .sampleUpsert: "sampleUpsert"
        case .samplesSynced: "samplesSynced"
        case .intervalStatus: "intervalStatus"
        case .intervalsCleared: "intervalsCleared"
        case .layeringRange: "layeringRange"
        case .dailyHighScore: "dailyHighScore"
        }
    }
}
