import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// `stepsync daily` on a store ingested from the two-source mock.
@Suite(.serialized) struct DailyCommandTests {
    let stepsync = builtProduct("stepsync")

    func json(_ lines: [String]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(lines.joined().utf8)) as? [String: Any])
    }

    @Test func everyDayOfAMockStoreAddsUp() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", "mock:days=30,end=2026-11-21"]).code == 0)
        let provider = MockStepDataProvider(configuration: MockConfiguration(days: 30, endDay: testEndDay))

        let r = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--by-source", "--json"])
        #expect(r.code == 0 && r.lines.count == 1)
        let document = try json(r.lines)
        #expect(document["timeZone"] as? String == "UTC" && document["from"] as? String == "2026-10-22")
        let days = try #require(document["days"] as? [[String: Any]])
        // 30 days of samples, and the last evening's reaching past midnight into a 31st.
        #expect((30...31).contains(days.count) && days.first?["date"] as? String == "2026-10-22")
        var raw = 0, merged = 0, watchDays = 0
        for day in days {
            let m = day["merged"] as! Int, r = day["raw"] as! Int
            let sources = day["sources"] as! [[String: Any]]
            #expect(m <= r)
            #expect(sources.reduce(0) { $0 + ($1["merged"] as! Int) } == m)
            #expect(sources.reduce(0) { $0 + ($1["raw"] as! Int) } == r)
            #expect(sources.map { $0["deviceName"] as! String } .allSatisfy { ["Mock Apple Watch", "Mock iPhone"].contains($0) })
            if sources.count == 2 {
                watchDays += 1
                #expect(sources[0]["deviceName"] as? String == "Mock Apple Watch" && m < r)
            } else {
                #expect(m == r)
            }
            raw += r
            merged += m
        }
        #expect(raw == Int(provider.totalSteps), "a sample's pieces add up to its count")
        #expect(watchDays >= 10 && merged < raw)

        // The same store, in process, gives the same document.
        let opened = try StepLogStore.open(store, options: StoreOptions(readOnly: true))
        let table = try SampleTable(store: opened)
        let calendar = LocalDayCalendar(identifier: "UTC")!
        let totals = DailyMerge.totals(table, priority: .default, calendar: calendar, days: table.dayRange(in: calendar)!)
        #expect(try canonicalJSON(bytes: totals.json(bySource: true)) == canonicalJSON(document))
    }

    @Test func rangesZonesFormatsAndPriority() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", "mock:days=10,end=2026-11-21"]).code == 0)
        // A range before the data, over New York's 25-hour day: rows of zeros, the day's length shown.
        let table = try runProgram(stepsync, ["daily", "--store", store, "--tz", "America/New_York", "--from", "2026-10-30", "--to", "2026-11-02"])
        #expect(table.code == 0)
        #expect(table.lines.first?.hasPrefix("steps a day in America/New_York") == true)
        #expect(table.lines.contains { $0.hasPrefix("2026-11-01") && $0.hasSuffix("(25 h)") }, "\(table.lines)")
        #expect(table.lines.contains { $0.hasPrefix("2026-10-30") && $0.contains(" 0 ") })
        #expect(table.lines.last?.hasPrefix("total") == true)
        let json = try self.json(try runProgram(stepsync, ["daily", "--store", store, "--tz", "America/New_York",
                                                           "--from", "2026-10-30", "--to", "2026-11-02", "--json"]).lines)
        let days = try #require(json["days"] as? [[String: Any]])
        #expect(days.map { $0["date"] as! String } == ["2026-10-30", "2026-10-31", "2026-11-01", "2026-11-02"])
        #expect(days.prefix(2).allSatisfy { $0["merged"] as? Int == 0 && $0["raw"] as? Int == 0 && $0["sources"] == nil })

        // CSV: a column pair per source, quoted where a label needs it.
        let csv = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--from", "2026-11-20", "--to", "2026-11-20",
                                            "--by-source", "--csv", "--priority", "iPhone, Apple Watch"])
        #expect(csv.lines.count == 2)
        #expect(csv.lines[0] == "date,merged,raw,com.apple.health.mock (Mock iPhone) merged,com.apple.health.mock (Mock iPhone) raw"
                || csv.lines[0] == "date,merged,raw,com.apple.health.mock (Mock iPhone) merged,com.apple.health.mock (Mock iPhone) raw,com.apple.health.mock (Mock Apple Watch) merged,com.apple.health.mock (Mock Apple Watch) raw")
        let cells = csv.lines[1].split(separator: ",").map(String.init)
        #expect(cells[0] == "2026-11-20" && Int(cells[1])! <= Int(cells[2])!)
        #expect(cells.count == 3 || Int(cells[3])! == Int(cells[4])!, "with iPhone first, the iPhone keeps all its steps")

        // A priority file, the same as the list.
        let file = tmp.sub("priority.txt")
        writeFile(file, Array("# mine\niPhone\n\nApple Watch\n".utf8))
        let a = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--json", "--priority-file", file]).lines
        let b = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--json", "--priority", "iPhone,Apple Watch"]).lines
        let byDefault = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--json"]).lines
        #expect(a == b && a != byDefault)
    }

    @Test func anEmptyStoreAndUsageErrors() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        try StepLogStore.open(store).close()
        let empty = try json(try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--json"]).lines)
        defer {
            // CSV quoting, on a source whose name needs it.
            let quoted = tmp.sub("quoted")
            let s = try! StepLogStore.open(quoted)
            try! s.upsert([StepSample(id: UUID(), startMilliseconds: 1_780_000_000_000, endMilliseconds: 1_780_000_060_000, count: 5,
                                      sourceBundleId: "Fit, \"Inc.\"", sourceDeviceName: nil)], fetchedAt: Date())
            try! s.close()
            let csv = try! runProgram(stepsync, ["daily", "--store", quoted, "--tz", "UTC", "--csv", "--by-source"]).lines
            #expect(csv == ["date,merged,raw,\"Fit, \"\"Inc.\"\" merged\",\"Fit, \"\"Inc.\"\" raw\"", "2026-05-28,5,5,5,5"])
        }
        #expect(empty["from"] is NSNull && empty["to"] is NSNull && (empty["days"] as? [Any])?.isEmpty == true)
        #expect(try runProgram(stepsync, ["daily", "--store", store]).lines == ["no samples (\(TimeZone.current.identifier))"])
        let bad: [([String], String)] = [
            (["--tz", "Mars/Olympus"], "unknown time zone"),
            (["--from", "2026-02-30"], "--from must be a date"),
            (["--from", "2026-03-02", "--to", "2026-03-01"], "is after --to"),
            (["--from", "1900-01-01", "--to", "2026-01-01"], "longer than 36600 days"),
            (["--priority", "iPhone,,Watch"], "pattern is empty"),
            (["--priority", "iPhone", "--priority-file", "x"], "cannot go together"),
            (["--priority-file", tmp.sub("missing")], "cannot read"),
            (["--json", "--csv"], "cannot go together"),
        ]
        for (arguments, message) in bad {
            let r = try runProgram(stepsync, ["daily", "--store", store] + arguments, mergeStandardError: true)
            #expect(r.code == 2 && r.lines.joined().contains(message), "\(arguments): \(r.lines)")
        }
        let missing = try runProgram(stepsync, ["daily", "--store", tmp.sub("nothing")], mergeStandardError: true)
        #expect(missing.code == 1 && missing.lines.joined().contains("is not a StepLog store"))
        #expect(try runProgram(stepsync, ["daily", "--help"]).lines.first?.hasPrefix("usage: stepsync daily") == true)
    }

    /// The table's columns are as wide as its widest number, so no two
    /// numbers run together however large the totals (the demo's two years
    /// made a 10-character raw total, which ran into the merged one:
    /// "7,675,28310,454,091"). Raw totals of 10, 11, 13 and 14 characters
    /// (a thousands separator makes 12 impossible), merged ones shorter.
    @Test func columnsStayApartAtEveryTotalWidth() throws {
        let tmp = TemporaryDirectory()
        // (Watch, iPhone) counts of one hour a day over three days: merged
        // is the Watch's (ranked first), raw the sum of both.
        let cases: [(watch: Int, phone: Int)] = [(2_558_428, 926_269), (30_000_000, 11_152_263),
                                                  (300_000_000, 111_111_111), (3_000_000_000, 1_000_000_000)]
        for (n, c) in cases.enumerated() {
            let store = tmp.sub("store\(n)")
            let s = try StepLogStore.open(store)
            for day in 0..<3 {
                let start = (testEndDay - 3 + Int64(day)) * 86_400_000 + 9 * 3_600_000
                try s.upsert([StepSample(id: UUID(), startMilliseconds: start, endMilliseconds: start + 3_600_000, count: c.watch,
                                         sourceBundleId: "com.apple.health.A", sourceDeviceName: "Apple Watch"),
                              StepSample(id: UUID(), startMilliseconds: start, endMilliseconds: start + 3_600_000, count: c.phone,
                                         sourceBundleId: "com.apple.health.B", sourceDeviceName: "iPhone")], fetchedAt: Date())
            }
            try s.close()
            let merged = Format.count(3 * c.watch), raw = Format.count(3 * (c.watch + c.phone))
            #expect([10, 11, 13, 14][n] == raw.count)
            for bySource in [false, true] {
                let lines = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC"] + (bySource ? ["--by-source"] : [])).lines
                let header = try #require(lines.dropFirst().first)
                let mergedEnd = try #require(header.range(of: "merged")).upperBound.utf16Offset(in: header)
                let rawEnd = header.utf16.count
                #expect(header.hasSuffix("raw"))
                let total = try #require(lines.last)
                #expect(total.hasPrefix("total ") && total.contains(" \(merged)  ") && total.contains(" \(raw)  over 3 days"), "\(lines)")
                // Every row's numbers end under their heading, two spaces or more apart.
                for line in lines.dropFirst(2) {
                    let numbers = line.split(separator: " ").filter { $0.first!.isNumber && $0.contains(",") || $0.allSatisfy(\.isNumber) }
                        .filter { !$0.contains("-") }
                    guard numbers.count >= 2 else { continue }
                    let a = try #require(line.range(of: " " + numbers[0])).upperBound.utf16Offset(in: line)
                    let b = try #require(line.range(of: " " + numbers[1], range: line.index(line.startIndex, offsetBy: a)..<line.endIndex)).upperBound.utf16Offset(in: line)
                    #expect(a == mergedEnd && b == rawEnd, "\(line) under \(header)")
                    #expect(b - numbers[1].count - a >= 2, "\(line)")
                }
            }
        }
    }
}
