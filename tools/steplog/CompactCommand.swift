import Foundation
import StepLog
import StepSync
import ToolSupport

/// `steplog compact DIR`.
enum CompactCommand {
    static let usage = """
        usage: steplog compact DIR [--json] [--wait SECONDS]

        Rewrites only what is live (each sample's current version with its synced state,
        each pending deletion's tombstone, each interval's latest status, current layering
        ranges, each day's high score, each source family's latest anchor) into new
        segments, switches to them atomically and deletes the old ones. Acknowledged
        deletions leave nothing behind. Killed at any moment, the store opens with the
        same contents and a later compaction finishes the job. Prints live and dead bytes
        before and after.

        When another process (stepsync ingest or upload) holds the store, it asks that
        process to compact in its background (a COMPACT-REQUEST file, which it looks for
        every half second, busy or idle) and waits up to --wait seconds (default 600;
        0: do not ask) for its answer.

        options:
          --json            before and after as one JSON object
          --wait SECONDS    how long to wait for the holder's answer (default 600; 0: do not ask)
        """

    static func run(_ arguments: [String], out: OutputSink, err: OutputSink) throws -> Int32 {
        guard let (dir, args) = try SteplogTool.parse(arguments, usage: usage, out: out, options: ["wait"], flags: ["json"]) else { return 0 }
        var wait = 600.0
        if let text = args.value("wait") {
            guard let seconds = Double(text), seconds >= 0 else { throw Arguments.UsageError("--wait takes a number of seconds, not '\(text)'") }
            wait = seconds
        }
        let progress = ProgressLine(err)
        let report: CompactionReport
        do {
            report = try StepLogStore.compact(directory: dir, options: StoreOptions(createIfMissing: false)) { read, total in
                progress.update("compacting: \(Format.bytes(read)) of \(Format.bytes(total)) read")
            }
        } catch StepLogError.locked(let path, let pid) where wait > 0 {
            return try askWriter(dir, lock: path, pid: pid, wait: wait, json: args.has("json"), out: out, err: err)
        }
        progress.finish()
        let rate = report.seconds > 0 ? Double(report.bytesRead) / report.seconds : 0
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

    /// A compaction request that could not be made or was not answered.
    struct RequestFailed: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Asks the process holding the store to compact it, and waits for its answer.
    private static func askWriter(_ dir: String, lock: String, pid: Int32?, wait: Double, json: Bool,
                                  out: OutputSink, err: OutputSink) throws -> Int32 {
        let request = dir + "/" + StepLogStore.compactionRequestFileName
        let result = dir + "/" + StepLogStore.compactionResultFileName
        let holder = pid.map { "pid \($0)" } ?? "another process"
        try? FileManager.default.removeItem(atPath: result)
        guard FileManager.default.createFile(atPath: request, contents: Data("pid \(getpid())\n".utf8)) else {
            throw RequestFailed("cannot write \(request) to ask \(holder) to compact")
        }
        let progress = ProgressLine(err)
        let started = Date()
        // The holder removes the request when it starts compacting.
        var taken = false
        while Date().timeIntervalSince(started) < wait {
            if let answer = try? String(contentsOfFile: result, encoding: .utf8) {
                progress.finish()
                try? FileManager.default.removeItem(atPath: result)
                return report(answer.trimmingCharacters(in: .whitespacesAndNewlines), dir: dir, holder: holder, json: json, out: out, err: err)
            }
            taken = taken || !FileManager.default.fileExists(atPath: request)
            let waited = Int(Date().timeIntervalSince(started))
            progress.update(taken ? "the store is held by \(holder), which is compacting it; waiting \(waited) s"
                                  : "the store is held by \(holder): asked it to compact; waiting \(waited) s")
            usleep(100_000)
        }
        progress.finish()
        if taken {
            throw RequestFailed("store is locked by \(holder) (\(lock)), which took the compaction request but did not finish within \(Format.duration(wait)); it goes on in its background and will write its answer to \(result)")
        }
        try? FileManager.default.removeItem(atPath: request)
        throw RequestFailed("store is locked by \(holder) (\(lock)), which did not take the compaction request within \(Format.duration(wait)) (a writer looks every half second: is that process stopped, or an older build?)")
    }

    private static func report(_ answer: String, dir: String, holder: String, json: Bool, out: OutputSink, err: OutputSink) -> Int32 {
        let fields = answer.split(separator: " ", maxSplits: 3).map(String.init)
        guard fields.first == "ok", fields.count == 4, let before = Int64(fields[1]), let after = Int64(fields[2]), let seconds = Double(fields[3]) else {
            err.line("steplog compact: \(holder) could not compact \(dir): \(answer.hasPrefix("failed ") ? String(answer.dropFirst(7)) : answer)")
            return 1
        }
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", dir)
            w.field("compactedBy", holder)
            w.field("bytesBefore", before)
            w.field("bytesAfter", after)
            w.key("seconds"); w.value(seconds)
            w.endObject()
            out.line(w.string)
        } else {
            out.line("compacted \(dir) in the background of \(holder) in \(Format.duration(seconds)): \(Format.bytes(before)) -> \(Format.bytes(after))")
        }
        return 0
    }
}
