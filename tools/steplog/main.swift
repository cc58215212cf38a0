// steplog: the maintenance tool for StepLog stores (verify, stats, dump,
// recover, compact). Each command lives in its own file; SteplogTool dispatches.
import Foundation
import ToolSupport

let code = await SteplogTool.run(Array(CommandLine.arguments.dropFirst()))
OutputSink.standardOutput.flush()
exit(code)
