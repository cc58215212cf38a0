import Foundation
import StepLog
import StepSync
import ToolSupport

/// Dispatch, usage and error rendering for `stepsync`. Exit codes: 0 ok,
/// 1 failure, 2 usage error, 130 paused by SIGINT/SIGTERM.
enum StepSyncTool {
    static let usage = """
        usage: stepsync <command> [options]

        commands:
          ingest     layer the source's data into intervals and fetch their samples into the store
          upload     send unsynced samples to the API server, 1,000 at a time
          status     the pipeline's stage and counts
          intervals  every interval, one JSON object per line
          export     every sample, one JSON object per line (the API's sample shape)
          today      today's steps that never go backwards (the monotonic ratchet)

        Run 'stepsync <command> --help' for a command's options.
        """

    static let out = OutputSink.standardOutput
    static let err = OutputSink.standardError

    static func run(_ arguments: [String]) async -> Int32 {
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
            case "ingest": return try await IngestCommand.run(rest)
            case "status": return try StatusCommand.run(rest)
            case "intervals": return try IntervalsCommand.run(rest)
            case "export": return try ExportCommand.run(rest)
            case "upload": return try await UploadCommand.run(rest)
            case "today": return try await TodayCommand.run(rest)
            default:
                err.line("stepsync: unknown command '\(command)'\n" + usage)
                return 2
            }
        } catch let error as Arguments.UsageError {
            err.line("stepsync \(command): \(error) (see 'stepsync \(command) --help')")
            return 2
        } catch let error as SourceSpecError {
            err.line("stepsync \(command): \(error)")
            return 2
        } catch {
            out.flush()
            err.line("stepsync \(command): \(error)")
            return 1
        }
    }

    /// Opens a store for reading: never creates one, takes no lock (readers
    /// see a consistent prefix of an append-only log), writes nothing.
    static func openForReading(_ path: String) throws -> StepLogStore {
        var options = StoreOptions()
        options.readOnly = true
        options.createIfMissing = false
        return try StepLogStore.open(path, options: options)
    }

    /// Prints `usage` and returns true when `--help` was given.
    static func helpRequested(_ arguments: [String], _ usage: String) -> Bool {
        guard arguments.contains("--help") || arguments.contains("-h") else { return false }
        out.line(usage)
        return true
    }
}
