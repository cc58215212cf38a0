// stepsync: the pipeline's command line (ingest, status, intervals, export,
// upload, today). Each command lives in its own file; StepSyncTool dispatches.
import Foundation
import ToolSupport

let code = await StepSyncTool.run(Array(CommandLine.arguments.dropFirst()))
OutputSink.standardOutput.flush()
exit(code)
