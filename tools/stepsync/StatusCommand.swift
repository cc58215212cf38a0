import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync status`: the stage and the counts.
enum StatusCommand {
    static let usage = """
        usage: stepsync status --store DIR [--json]

        The pipeline's stage (not started, layering, fetching, ready to upload, uploading,
        synced) and counts of samples, deletions waiting for upload and intervals; samples
        the server rejected (count and the first reasons). Reads without locking: works while ingest or
        upload runs.
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store"], flags: ["json"])
        try args.expectPositionals(0, "")
        let path = try args.required("store")
        let store = try StepSyncTool.openForReading(path)
        let counts = store.counts
        let stage = PipelineStage.of(store)
        let rejected = try store.rejectedSamples(limit: 5)
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", path)
            w.field("stage", stage.rawValue)
            writeCounts(counts, into: &w)
            w.key("firstRejections"); w.beginArray()
            for r in rejected {
                w.beginObject()
                w.field("id", r.sample.id.uuidString)
                w.field("reason", r.rejection.reason)
                w.key("rejectedAt"); w.timestamp(milliseconds: r.rejection.rejectedAtMilliseconds)
                w.endObject()
            }
            w.endArray()
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("store \(path): \(stage.rawValue)")
            out.line("  samples: \(Format.count(counts.samples)) (\(Format.count(counts.syncedSamples)) synced, \(Format.count(counts.unsyncedSamples)) unsynced)")
            out.line("  deletions waiting for upload: \(Format.count(counts.pendingDeletions))")
            if counts.rejectedSamples > 0 {
                out.line("  rejected by the server: \(Format.count(counts.rejectedSamples)) (not sent again until their content changes)")
                for r in rejected { out.line("    \(r.sample.id.uuidString): \(r.rejection.reason)") }
                if counts.rejectedSamples > rejected.count { out.line("    …") }
            }
            out.line("  intervals: \(Format.count(counts.intervalTotal)) (" + IntervalStatus.allCases.map { "\(Format.count(counts.intervals[$0] ?? 0)) \($0)" }.joined(separator: ", ") + ")")
            out.line("  log: \(Format.bytes(counts.bytes)) in \(Format.count(counts.segments, "segment"))")
        }
        return 0
    }

    /// The counts every JSON summary shares.
    static func writeCounts(_ counts: StoreCounts, into w: inout JSONWriter) {
        w.field("samples", counts.samples)
        w.field("syncedSamples", counts.syncedSamples)
        w.field("unsyncedSamples", counts.unsyncedSamples)
        w.field("rejectedSamples", counts.rejectedSamples)
        w.field("pendingDeletions", counts.pendingDeletions)
        w.key("intervals"); w.beginObject()
        for status in IntervalStatus.allCases { w.field(status.description, counts.intervals[status] ?? 0) }
        w.endObject()
        w.field("segments", counts.segments)
        w.field("bytes", counts.bytes)
    }
}
