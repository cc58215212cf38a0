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
        the server rejected (count and the first reasons); the kinds of source the samples
        came from (real ones, the mock's made-up ones, or both: then how to remove the
        mock's); where the store uploads (server, user, URL), when that server was last
        proven to hold exactly what the store acknowledged, and the destinations known
        before. Reads without locking: works while ingest or upload runs.

        options:
          --store DIR   the StepLog store
          --json        {"store","stage","samples","syncedSamples","unsyncedSamples",
                        "rejectedSamples","pendingDeletions","intervals","segments","bytes",
                        "realSamples","mockSamples","firstRejections","destination",
                        "destinations"}
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
        let kinds = try StoreSourceKinds.of(store)
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", path)
            w.field("stage", stage.rawValue)
            writeCounts(counts, into: &w)
            w.field("realSamples", kinds.realSamples)
            w.field("mockSamples", kinds.mockSamples)
            w.key("firstRejections"); w.beginArray()
            for r in rejected {
                w.beginObject()
                w.field("id", r.sample.id.uuidString)
                w.field("reason", r.rejection.reason)
                w.key("rejectedAt"); w.timestamp(milliseconds: r.rejection.rejectedAtMilliseconds)
                w.endObject()
            }
            w.endArray()
            w.key("destination")
            if let d = store.destination { write(d, into: &w) } else { w.null() }
            w.key("destinations"); w.beginArray()
            for d in store.destinations { write(d, into: &w) }
            w.endArray()
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("store \(path): \(stage.rawValue)")
            out.line("  samples: \(Format.count(counts.samples)) (\(Format.count(counts.syncedSamples)) synced, \(Format.count(counts.unsyncedSamples)) unsynced)")
            if let line = sourcesLine(kinds, store: path) { out.line("  " + line) }
            out.line("  deletions waiting for upload: \(Format.count(counts.pendingDeletions))")
            if counts.rejectedSamples > 0 {
                out.line("  rejected by the server: \(Format.count(counts.rejectedSamples)) (not sent again until their content changes)")
                for r in rejected { out.line("    \(r.sample.id.uuidString): \(r.rejection.reason)") }
                if counts.rejectedSamples > rejected.count { out.line("    …") }
            }
            out.line("  intervals: \(Format.count(counts.intervalTotal)) (" + IntervalStatus.allCases.map { "\(Format.count(counts.intervals[$0] ?? 0)) \($0)" }.joined(separator: ", ") + ")")
            out.line("  log: \(Format.bytes(counts.bytes)) in \(Format.count(counts.segments, "segment"))")
            if let d = store.destination {
                out.line("  destination: \(describe(d)); " + (d.provenEqualAtMilliseconds > 0
                    ? "last proven to hold exactly what the store acknowledged \(ISO8601.format(milliseconds: d.provenEqualAtMilliseconds))"
                    : "not yet proven to hold what the store acknowledged"))
                for earlier in store.destinations.dropLast() { out.line("  earlier destination: \(describe(earlier))") }
            } else {
                out.line("  destination: none yet (acknowledgements recorded before it, if any, are checked at the next upload)")
            }
        }
        return 0
    }

    /// What the samples came from; for a store holding the mock's beside
    /// real ones, what that means and the way out.
    static func sourcesLine(_ kinds: StoreSourceKinds, store: String) -> String? {
        switch (kinds.realSamples, kinds.mockSamples) {
        case (0, 0): return nil
        case (_, 0): return "sources: real (no mock samples)"
        case (0, let mock): return "sources: the mock (\(Format.count(mock)) made-up samples, --source mock)"
        case (let real, let mock):
            return "sources: MIXED: \(Format.count(mock)) samples of the mock beside \(Format.count(real)) real ones; "
                + "daily totals count them and upload sends them. Remove them: stepsync forget --store \(store) --source mock"
        }
    }

    static func describe(_ d: StoreDestination) -> String {
        d.serverId.isEmpty ? "\(d.url) (a server without GET /steps/digest: never checked)" : "\(d.url) (server \(d.serverId), user \(d.user))"
    }

    static func write(_ d: StoreDestination, into w: inout JSONWriter) {
        w.beginObject()
        w.field("serverId", d.serverId)
        w.field("user", d.user)
        w.field("url", d.url)
        w.field("uploader", d.uploader.uuidString)
        w.key("recordedAt"); w.timestamp(milliseconds: d.recordedAtMilliseconds)
        w.key("provenEqualAt")
        if d.provenEqualAtMilliseconds > 0 { w.timestamp(milliseconds: d.provenEqualAtMilliseconds) } else { w.null() }
        w.endObject()
    }

    /// The counts every JSON summary shares.
    static func writeCounts(_ counts: StoreCounts, into w: inout JSONWriter) {
        w.storeCounts(counts)
        w.field("segments", counts.segments)
        w.field("bytes", counts.bytes)
    }
}
