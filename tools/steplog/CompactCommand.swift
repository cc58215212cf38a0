import StepLog
import StepSync
import ToolSupport

/// `steplog compact DIR`.
enum CompactCommand {
    static let usage = """
        usage: steplog compact DIR [--json]

        Rewrites only what is live (each sample's current version with its synced state,
        each pending deletion's tombstone, each interval's latest status, current layering
        ranges, each day's high score, each source family's latest anchor) into new
        segments, switches to them atomically and deletes the old ones. Acknowledged
        deletions leave nothing behind. Takes
        the store's lock; killed at any moment, the store opens with the same contents
        and a later compaction finishes the job. Prints live and dead bytes before and after.
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        guard let (dir, args) = try SteplogTool.parse(arguments, usage: usage, flags: ["json"]) else { return 0 }
        let progress = ProgressLine()
        let report = try StepLogStore.compact(directory: dir, options: StoreOptions(createIfMissing: false)) { read, total in
            progress.update("compacting: \(Format.bytes(read)) of \(Format.bytes(total)) read")
        }
        progress.finish()
        let rate = report.seconds > 0 ? Double(report.bytesRead) / report.seconds : 0
        let out = SteplogTool.out
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", dir)
            for (name, f) in [("before", report.before), ("after", report.after)] {
                w.key(name); w.beginObject()
                SteplogTool.writeFigures(f, to: &w)
                w.endObject()
            }
            w.key("seconds"); w.value(report.seconds)
            w.key("inputBytesPerSecond"); w.value(rate)
            w.endObject()
            out.line(w.string)
            return 0
        }
        func describe(_ f: StoreFigures) -> String {
            "\(Format.bytes(f.bytes)) in \(Format.count(f.segments, "segment")): live \(Format.bytes(f.liveBytes)), dead \(Format.bytes(f.deadBytes)), \(Format.count(f.liveRecords)) of \(Format.count(f.records)) records live"
        }
        out.line("compacted \(dir) in \(Format.duration(report.seconds)) (\(Format.bytes(Int64(rate)))/s of input)")
        out.line("  before: \(describe(report.before))")
        out.line("  after:  \(describe(report.after))")
        return 0
    }
}
