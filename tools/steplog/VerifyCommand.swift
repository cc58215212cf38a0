import StepLog
import StepSync
import ToolSupport

/// `steplog verify DIR`.
enum VerifyCommand {
    static let usage = """
        usage: steplog verify DIR

        Checks every segment header and the chain of segments, every record's framing,
        checksum, type and payload (synced-through records claim no more than their own
        offset and never less than the one before; padding is all zero), every index
        snapshot (against a fresh build from its segment), and the index's invariants
        (live samples and pending deletions point at their records; counts add up).
        Read-only, works on a damaged store, and keeps going after a problem. Prints each
        problem (file @ offset: what), then 'N problems found' (exit 1) or 'OK' (exit 0).
        Notes (an unsynced tail the next writer truncates, a missing snapshot) are
        printed but are not problems.
        """

    static func run(_ arguments: [String], out: OutputSink) throws -> Int32 {
        guard let (dir, _) = try SteplogTool.parse(arguments, usage: usage, out: out) else { return 0 }
        let result = try StoreVerifier.verify(directory: dir)
        for note in result.notes { out.line("note: \(note)") }
        for problem in result.problems { out.line(problem.description) }
        if result.problems.isEmpty {
            out.line("OK (\(Format.count(result.segments, "segment")), \(Format.count(result.records, "record")), \(Format.count(result.snapshots, "snapshot")))")
            return 0
        }
        out.line("\(Format.count(result.problems.count, "problem")) found")
        return 1
    }
}
