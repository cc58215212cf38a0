import StepLog
import StepSync
import ToolSupport

/// `steplog recover DIR`.
enum RecoverCommand {
    static let usage = """
        usage: steplog recover DIR

        The salvage path for a damaged store: keeps every record before the first damage,
        sets aside everything after it (the rest of that segment and every later one) in
        one file next to the store (DIR.salvage-<segment>-<offset>.bin), and reports what
        was dropped. An unsynced tail (bytes no sync acknowledged, from a writer that died
        or a power loss) is dropped as any open would.
        """

    static func run(_ arguments: [String], out: OutputSink) throws -> Int32 {
        guard let (dir, _) = try SteplogTool.parse(arguments, usage: usage, out: out) else { return 0 }
        var options = StoreOptions(salvage: true, createIfMissing: false)
        options.useSnapshots = false // read every record: damage behind a snapshot must be found too
        let store = try StepLogStore.open(dir, options: options)
        let report = store.openReport
        try store.close()
        var changed = false
        if let torn = report.tornTail {
            out.line("dropped an unsynced tail: \(torn.bytesDropped) bytes at \(torn.segment) @ \(torn.offset) (no sync acknowledged them)")
            changed = true
        }
        if let s = report.salvage {
            out.line("damage at \(s.segment) @ \(s.offset): \(s.reason)")
            out.line("kept everything before it; dropped \(Format.bytes(s.bytesDropped)) (the rest of that segment and \(Format.count(s.segmentsDropped, "later segment")))")
            if let path = s.setAsidePath { out.line("the dropped bytes are set aside in \(path)") }
            changed = true
        }
        for name in report.compactionFinished { out.line("finished an interrupted compaction: removed \(name)") }
        for name in report.compactionDiscarded { out.line("discarded an uncommitted compaction: removed \(name)") }
        if !changed && report.compactionFinished.isEmpty && report.compactionDiscarded.isEmpty {
            out.line("nothing to recover: every record is intact")
        }
        return 0
    }
}
