import StepLog
import StepSync
import ToolSupport

/// `steplog stats DIR`.
enum StatsCommand {
    static let usage = """
        usage: steplog stats DIR [--json]

        Segments, bytes, records and live records by type, live and dead bytes (what
        compaction would reclaim), synced-through and padding bytes, samples synced and
        unsynced and rejected by the server, tombstones (deletion records: all, and those still pending), pending
        deletions, intervals by status.

        options:
          --json        the same as one JSON object
        """

    static func run(_ arguments: [String], out: OutputSink) throws -> Int32 {
        guard let (dir, args) = try SteplogTool.parse(arguments, usage: usage, out: out, flags: ["json"]) else { return 0 }
        let store = try SteplogTool.openReadOnly(dir)
        let f = try store.figures()
        let counts = store.counts
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", dir)
            SteplogTool.writeFigures(f, to: &w)
            w.key("recordsByType"); w.beginObject()
            for t in RecordType.allCases {
                let x = f.byType[t] ?? StoreFigures.TypeFigures()
                w.key(SteplogTool.typeName(t)); w.beginObject()
                w.field("records", x.records)
                w.field("liveRecords", x.liveRecords)
                w.field("bytes", x.bytes)
                w.field("liveBytes", x.liveBytes)
                w.endObject()
            }
            w.endObject()
            w.storeCounts(counts)
            let tombstones = f.byType[.sampleDeleted] ?? StoreFigures.TypeFigures()
            w.key("tombstones"); w.beginObject()
            w.field("records", tombstones.records)
            w.field("bytes", tombstones.bytes)
            w.field("liveRecords", tombstones.liveRecords)
            w.field("liveBytes", tombstones.liveBytes)
            w.endObject()
            w.endObject()
            out.line(w.string)
            return 0
        }
        out.line("store \(dir): \(Format.count(f.segments, "segment")), \(Format.bytes(f.bytes))")
        out.line("  live \(Format.bytes(f.liveBytes)), dead \(Format.bytes(f.deadBytes)) (\(Format.percent(f.bytes > 0 ? Double(f.deadBytes) / Double(f.bytes) : 0)) reclaimable by compaction), headers \(Format.bytes(f.headerBytes)), sync marks \(Format.bytes(f.syncMarkBytes))")
        out.line("  records: \(Format.count(f.records)) (\(Format.count(f.liveRecords)) live)")
        for t in RecordType.allCases {
            let x = f.byType[t] ?? StoreFigures.TypeFigures()
            out.line("    \(SteplogTool.typeName(t)): \(Format.count(x.records)) (\(Format.count(x.liveRecords)) live), \(Format.bytes(x.bytes))")
        }
        out.line("  samples: \(Format.count(counts.samples)) (\(Format.count(counts.syncedSamples)) synced, \(Format.count(counts.unsyncedSamples)) unsynced, \(Format.count(counts.rejectedSamples)) rejected by the server)")
        let tombstones = f.byType[.sampleDeleted] ?? StoreFigures.TypeFigures()
        out.line("  tombstones: \(Format.count(tombstones.records)) records, \(Format.bytes(tombstones.bytes)) (\(Format.count(tombstones.liveRecords)) live, \(Format.bytes(tombstones.liveBytes))); deletions waiting for the server: \(Format.count(counts.pendingDeletions))")
        out.line("  intervals: " + IntervalStatus.allCases.map { "\(Format.count(counts.intervals[$0] ?? 0)) \($0)" }.joined(separator: ", "))
        return 0
    }
}
