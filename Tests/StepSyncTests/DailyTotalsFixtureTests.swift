import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The hand-worked cases of Tests/Fixtures/totals (docs/TOTALS.md §7), which
/// the server's tests check too: in process, and through `stepsync daily` on a
/// store holding the case's samples.
@Suite struct DailyTotalsFixtureTests {
    @Test func theFixtureHasTheCasesTheDocumentPromises() {
        #expect(TotalsFixture.all.map(\.name) == ["custom-priority.json", "dst-23h.json", "dst-25h.json", "fractional.json", "instantaneous.json",
                                                   "midnight.json", "overlap.json", "renamed-devices-priority.json",
                                                   "renamed-devices.json", "three-sources.json"])
    }

    @Test(arguments: TotalsFixture.all)
    func inProcess(_ fixture: TotalsFixture) throws {
        let priority = try fixture.priorityPatterns.map { try SourcePriority(patterns: $0) } ?? .default
        let calendar = try #require(LocalDayCalendar(identifier: fixture.timeZone))
        let days = try #require(LocalDayCalendar.parse(date: fixture.from))...(try #require(LocalDayCalendar.parse(date: fixture.to)))
        // Sample order must not matter: as given, and reversed.
        for samples in [fixture.samples, fixture.samples.reversed()] {
            let totals = DailyMerge.totals(SampleTable(samples), priority: priority, calendar: calendar, days: days)
            #expect(try canonicalJSON(bytes: totals.json(bySource: true)) == canonicalJSON(fixture.expected))
        }
    }

    @Test(arguments: TotalsFixture.all)
    func throughTheCommandOnAStore(_ fixture: TotalsFixture) throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        try store.upsert(fixture.samples, fetchedAt: Date())
        try store.close()
        var arguments = ["daily", "--store", tmp.sub("store"), "--tz", fixture.timeZone, "--from", fixture.from, "--to", fixture.to]
        if let patterns = fixture.priorityPatterns { arguments += ["--priority", patterns.joined(separator: ",")] }
        let withSources = try runProgram(builtProduct("stepsync"), arguments + ["--by-source", "--json"])
        #expect(withSources.code == 0)
        #expect(try canonicalJSON(bytes: Array(withSources.lines.joined().utf8)) == canonicalJSON(fixture.expected))
        // Without --by-source: the same rows without "sources".
        let plain = try runProgram(builtProduct("stepsync"), arguments + ["--json"])
        var expected = fixture.expected as! [String: Any]
        expected["days"] = (expected["days"] as! [[String: Any]]).map { row in row.filter { $0.key != "sources" } }
        #expect(try canonicalJSON(bytes: Array(plain.lines.joined().utf8)) == canonicalJSON(expected))
    }
}
