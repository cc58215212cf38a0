import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync intervals`: every interval as a JSON line, in time order.
enum IntervalsCommand {
    static let usage = """
        usage: stepsync intervals --store DIR

        One JSON object per line, in time order:
        {"id":"…","start":"…Z","end":"…Z","stepCount":N,"status":"pending|empty|fetched|synced"}

        options:
          --store DIR   the StepLog store
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store"], flags: [])
        try args.expectPositionals(0, "")
        let store = try StepSyncTool.openForReading(try args.required("store"))
        let out = StepSyncTool.out
        for interval in store.intervals() {
            var w = JSONWriter(capacity: 160)
            w.beginObject()
            w.field("id", interval.id.uuidString)
            w.key("start"); w.timestamp(milliseconds: interval.startMilliseconds)
            w.key("end"); w.timestamp(milliseconds: interval.endMilliseconds)
            w.field("stepCount", interval.stepCount)
            w.field("status", interval.status.description)
            w.endObject()
            out.write(bytes: w.bytes + [0x0A])
        }
        return 0
    }
}
