import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync export`: every sample as a JSON line in the API's sample shape,
/// ordered by startDate then id.
enum ExportCommand {
    static let usage = """
        usage: stepsync export --store DIR

        Every sample (its current version), one JSON object per line, in the API's shape
        {"id","startDate","endDate","count","sourceBundleId","sourceDeviceName"},
        ordered by startDate, then id.

        options:
          --store DIR   the StepLog store
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store"], flags: [])
        try args.expectPositionals(0, "")
        let store = try StepSyncTool.openForReading(try args.required("store"))
        let out = StepSyncTool.out
        for sample in try SampleExport.sortedByStart(store) {
            out.write(bytes: SampleJSON.encode(sample) + [0x0A])
        }
        return 0
    }
}
