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
          upload     send unsynced samples to the API server, 1,000 at a time, and check it holds them
          reconcile  compare what the server holds with what the store acknowledged, day by day, and repair it
          status     the pipeline's stage and counts
          intervals  every interval, one JSON object per line
          export     every sample, one JSON object per line (the API's sample shape)
          today      today's steps that never go backwards (the monotonic ratchet)
          daily      steps per local day, overlapping sources (Watch, iPhone) counted once
          forget     delete the mock's samples from a store that holds them beside real ones

        Run 'stepsync <command> --help' (or 'stepsync help <command>') for a command's options,
        'stepsync --version' for the version.
        """

    static let out = OutputSink.standardOutput
    static let err = OutputSink.standardError

    static func run(_ arguments: [String]) async -> Int32 {
        let tool = CommandLineTool(name: "stepsync", usage: usage,
                                   isUsageError: { $0 is Arguments.UsageError || $0 is SourceSpecError })
        return await tool.run(arguments, commands: [
            "ingest": IngestCommand.run,
            "upload": UploadCommand.run,
            "reconcile": ReconcileCommand.run,
            "status": { try StatusCommand.run($0) },
            "intervals": { try IntervalsCommand.run($0) },
            "export": { try ExportCommand.run($0) },
            "today": TodayCommand.run,
            "daily": { try DailyCommand.run($0) },
            "forget": { try ForgetCommand.run($0) },
        ])
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
