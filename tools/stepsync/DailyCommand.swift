import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync daily`: step totals per local day, sources merged as the Health
/// app merges them (docs/TOTALS.md).
enum DailyCommand {
    static let usage = """
        usage: stepsync daily --store DIR [--tz ZONE] [--from DATE] [--to DATE] [--by-source]
                              [--priority LIST | --priority-file PATH] [--json | --csv]

        Steps per local calendar day, with overlapping sources counted once, as the Health
        app counts them (docs/TOTALS.md): where an Apple Watch and an iPhone both recorded
        a walk, only the higher-ranked source counts; a sample's steps are spread evenly
        over its duration. One row per day: the merged total and the raw sum of every
        sample (what summing samples gives), and with --by-source each source's share.
        Reads the store without a lock (works while ingest or upload runs).

        options:
          --store DIR           the StepLog store
          --tz ZONE             IANA time zone of the days, e.g. Europe/Paris (default: the
                                system's); DST days are 23 or 25 hours long
          --from DATE           first day, YYYY-MM-DD (default: the first day with samples)
          --to DATE             last day, YYYY-MM-DD (default: the last day with samples)
          --by-source           each source's merged and raw steps too
          --priority LIST       sources highest first, comma-separated patterns; TEXT matches
                                a source whose name contains TEXT, =TEXT one named exactly
                                TEXT (ASCII case ignored); unnamed sources rank last.
                                Default: "=Health,=com.apple.Health,Apple Watch,iPhone,iPod"
          --priority-file PATH  the same, one pattern a line (# comments)
          --json                the document GET /steps/daily answers, on one line
          --csv                 date,merged,raw[,"<source> merged","<source> raw",…]
        """

    /// The longest range printed: 100 years of days.
    static let maximumDays: Int64 = 36_600

    static func run(_ arguments: [String]) throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store", "tz", "from", "to", "priority", "priority-file"],
                                 flags: ["by-source", "json", "csv"])
        try args.expectPositionals(0, "")
        let storePath = try args.required("store")
        if args.has("json") && args.has("csv") { throw Arguments.UsageError("--json and --csv cannot go together") }
        var calendar = LocalDayCalendar(timeZone: TimeZone.current)
        if let name = args.value("tz") {
            guard let c = LocalDayCalendar(identifier: name) else { throw Arguments.UsageError("--tz: unknown time zone '\(name)'") }
            calendar = c
        }
        func date(_ option: String) throws -> Int64? {
            guard let text = args.value(option) else { return nil }
            guard let day = LocalDayCalendar.parse(date: text) else {
                throw Arguments.UsageError("--\(option) must be a date YYYY-MM-DD, found '\(text)'")
            }
            return day
        }
        let from = try date("from"), to = try date("to")
        if let from, let to, from > to { throw Arguments.UsageError("--from \(args.value("from")!) is after --to \(args.value("to")!)") }
        let priority = try self.priority(args)

        let store = try StepSyncTool.openForReading(storePath)
        let table = try SampleTable(store: store)
        try store.close()
        let mock = StoreSourceKinds.mockBundleId
        if table.sources.contains(where: { $0.bundleId == mock }) && table.sources.contains(where: { $0.bundleId != mock }) {
            StepSyncTool.err.line("stepsync daily: warning: \(storePath) holds samples of the mock beside real ones, and these totals count both; "
                                  + "stepsync forget --store \(storePath) --source mock removes the mock's")
        }
        let data = table.dayRange(in: calendar)
        var days: ClosedRange<Int64>?
        if let first = from ?? data.map({ min($0.lowerBound, to ?? .max) }),
           let last = to ?? data.map({ max($0.upperBound, from ?? .min) }) {
            days = first...last
        }
        if let days, days.upperBound - days.lowerBound + 1 > maximumDays {
            throw Arguments.UsageError("the range \(LocalDayCalendar.format(day: days.lowerBound)) to \(LocalDayCalendar.format(day: days.upperBound)) is longer than \(maximumDays) days")
        }
        let totals = DailyMerge.totals(table, priority: priority, calendar: calendar, days: days)
        let bySource = args.has("by-source")
        let out = StepSyncTool.out
        if args.has("json") {
            out.write(bytes: totals.json(bySource: bySource) + [0x0A])
        } else if args.has("csv") {
            writeCSV(totals, bySource: bySource, to: out)
        } else {
            writeTable(totals, bySource: bySource, to: out)
        }
        return 0
    }

    static func priority(_ args: Arguments) throws -> SourcePriority {
        do {
            switch (args.value("priority"), args.value("priority-file")) {
            case (nil, nil): return .default
            case (let list?, nil): return try SourcePriority(list: list)
            case (nil, let path?):
                guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                    throw Arguments.UsageError("--priority-file \(path): cannot read it as UTF-8 text")
                }
                return try SourcePriority(fileText: text)
            default: throw Arguments.UsageError("--priority and --priority-file cannot go together")
            }
        } catch let error as SourcePriorityError {
            throw Arguments.UsageError("--priority: \(error)")
        }
    }

    static func writeCSV(_ totals: DailyTotals, bySource: Bool, to out: OutputSink) {
        let sources = bySource ? totals.sourcesWithSteps : []
        var header = ["date", "merged", "raw"]
        for s in sources { header += ["\(s.label) merged", "\(s.label) raw"] }
        out.line(header.map(csvField).joined(separator: ","))
        for i in 0..<totals.dayCount {
            let d = totals.day(i)
            var row = [d.date, String(d.merged), String(d.raw)]
            for s in sources {
                let share = d.sources.first { $0.source == s }
                row += [String(share?.merged ?? 0), String(share?.raw ?? 0)]
            }
            out.line(row.map(csvField).joined(separator: ","))
        }
    }

    /// RFC 4180: quoted when it holds a comma, a quote or a line break.
    static func csvField(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else { return s }
        return "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func writeTable(_ totals: DailyTotals, bySource: Bool, to out: OutputSink) {
        guard totals.dayCount > 0 else {
            out.line("no samples (\(totals.timeZone))")
            return
        }
        var merged: Int64 = 0, raw: Int64 = 0
        for i in 0..<totals.dayCount {
            merged += totals.day(i).merged
            raw += totals.day(i).raw
        }
        // Columns as wide as the widest number they hold (the totals), two spaces apart.
        let width = max("merged".count, Format.count(max(merged, raw)).count)
        func pad(_ s: String) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
        func columns(_ m: Int64, _ r: Int64) -> String { pad(Format.count(m)) + "  " + pad(Format.count(r)) }
        out.line("steps a day in \(totals.timeZone), sources merged by priority: \(totals.priority.patterns.joined(separator: ", "))")
        out.line("date        " + pad("merged") + "  " + pad("raw"))
        for i in 0..<totals.dayCount {
            let d = totals.day(i)
            let hours = d.milliseconds % 3_600_000 == 0 ? "\(d.milliseconds / 3_600_000)" : String(format: "%.1f", Double(d.milliseconds) / 3_600_000)
            let note = d.milliseconds == 86_400_000 ? "" : "  (\(hours) h)"
            out.line(d.date + "  " + columns(d.merged, d.raw) + note)
            if bySource {
                for s in d.sources {
                    out.line("            " + columns(s.merged, s.raw) + "  " + s.source.label)
                }
            }
        }
        let over = merged > 0 ? String(format: " (the raw sum is %+.1f%%)", Double(raw - merged) / Double(merged) * 100) : ""
        out.line("total       " + columns(merged, raw) + "  over \(Format.count(totals.dayCount, "day"))\(over)")
    }
}
