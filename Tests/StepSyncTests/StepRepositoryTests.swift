import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Seed 004's ratchet with a virtual clock.
@Suite struct StepRepositoryTests {
    func date(_ text: String) -> Date { Milliseconds.date(ISO8601.parse(text)!) }
    let paris = TimeZone(identifier: "Europe/Paris")!
    let newYork = TimeZone(identifier: "America/New_York")!

    @Test func neverDecreasesUnderNoisyOrFallingInputs() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let clock = VirtualClock(date("2026-06-10T06:00:00Z"))
        let repo = StepRepository(store: store, clock: clock, timeZone: { self.paris })
        var seen: [Int] = []
        repo.observe { seen.append($0.steps) }
        var rng = SeededGenerator(seed: 4)
        var maxInput = 0
        for _ in 0..<500 {
            clock.advance(by: Double.random(in: 1...60, using: &rng))
            let value = Int.random(in: 0...12_000, using: &rng) // noisy, often lower than before
            let shown = Bool.random(using: &rng) ? try repo.update(pedometer: value) : try repo.update(verified: value)
            maxInput = max(maxInput, value)
            #expect(shown.steps == maxInput)
        }
        #expect(seen == seen.sorted() && Set(seen).count == seen.count) // only increases were published
        #expect(store.highScore(day: repo.today.day)?.steps == Int64(maxInput))
    }

    @Test func resetsAtLocalMidnightIncludingDSTDays() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        // 2026-03-08 in New York is 23 hours long (clocks jump 02:00 → 03:00);
        // 2026-11-01 is 25 hours long (01:00-02:00 happens twice).
        for (before, after, hoursLong) in [("2026-03-08T04:59:59Z", "2026-03-09T04:00:00Z", 23.0),
                                           ("2026-11-01T03:59:59Z", "2026-11-02T05:00:00Z", 25.0)] {
            let clock = VirtualClock(date(before))
            let repo = StepRepository(store: store, clock: clock, timeZone: { self.newYork })
            let firstDay = repo.today.day
            try repo.update(pedometer: 100)
            clock.advance(by: 1) // local midnight: a new day
            try repo.tick()
            #expect(repo.today.day != firstDay && repo.today.steps == 0)
            try repo.update(pedometer: 500)
            // The whole DST day is one day: just before its end it is still the same date.
            let startOfDay = repo.today.day
            clock.set(date(after).addingTimeInterval(-1))
            try repo.tick()
            #expect(repo.today.day == startOfDay && repo.today.steps == 500)
            #expect(date(after).timeIntervalSince(date(before).addingTimeInterval(1)) == hoursLong * 3600)
            clock.advance(by: 1)
            try repo.tick()
            #expect(repo.today.day != startOfDay && repo.today.steps == 0)
        }
    }

    @Test func aTimeZoneChangeMovesToThatDaysHighScore() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        var zone = TimeZone(identifier: "Asia/Tokyo")!
        // 2026-06-10T20:00Z is June 11, 05:00 in Tokyo and June 10, 13:00 in Los Angeles.
        let clock = VirtualClock(date("2026-06-10T20:00:00Z"))
        let repo = StepRepository(store: store, clock: clock, timeZone: { zone })
        try repo.update(pedometer: 2_000)
        #expect(repo.today.date == "2026-06-11")
        // June 10 in Los Angeles already had 9,000 steps saved earlier.
        try store.recordHighScore(DailyHighScore(day: 20260610, steps: 9_000, recordedAtMilliseconds: 0))
        zone = TimeZone(identifier: "America/Los_Angeles")!
        try repo.tick()
        #expect(repo.today.date == "2026-06-10" && repo.today.steps == 9_000)
        try repo.update(pedometer: 3_000) // a lower reading changes nothing
        #expect(repo.today.steps == 9_000)
    }

    @Test func theHighScoreSurvivesARestart() throws {
        let dir = TemporaryDirectory()
        let clock = VirtualClock(date("2026-06-10T12:00:00Z"))
        do {
            let store = try StepLogStore.open(dir.path)
            let repo = StepRepository(store: store, clock: clock, timeZone: { self.paris })
            try repo.update(verified: 7_777)
            // No close: a crash right after the update.
        }
        let store = try StepLogStore.open(dir.path)
        let repo = StepRepository(store: store, clock: clock, timeZone: { self.paris })
        #expect(repo.today.steps == 7_777)
        #expect(try repo.update(pedometer: 10).steps == 7_777)
    }

    @Test func throttlesFireAtMostAtTheirRateAndAlwaysDeliverTheLastValue() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let clock = VirtualClock(date("2026-06-10T08:00:00Z"))
        var widget: [(Date, Int)] = [], leaderboard: [(Date, Int)] = []
        let repo = StepRepository(store: store, clock: clock, timeZone: { self.paris },
                                  widgetRefresh: { widget.append((clock.now(), $0)) },
                                  leaderboardSync: { leaderboard.append((clock.now(), $0)) })
        var last = 0
        for i in 1...200 { // a new reading every 0.7 s for 140 s
            clock.advance(by: 0.7)
            try repo.tick()
            last = i * 10
            try repo.update(pedometer: last)
        }
        // Let time pass until nothing is due.
        while let due = repo.nextDue {
            clock.set(due)
            try repo.tick()
        }
        for (calls, interval) in [(widget, 15.0), (leaderboard, 30.0)] {
            #expect(calls.last?.1 == last, "the last value must go out")
            for (a, b) in zip(calls, calls.dropFirst()) {
                #expect(b.0.timeIntervalSince(a.0) >= interval - 1e-9, "calls \(interval) s apart at most")
            }
            #expect(calls.count >= Int(140 / interval) && calls.count <= Int(140 / interval) + 2)
            #expect(calls.map(\.1) == calls.map(\.1).sorted())
        }
    }

    /// B is today's merged total: the Watch's and the iPhone's samples of the
    /// same walk count once, a walk that started before midnight counts its
    /// part after it, and yesterday counts nothing.
    @Test func theVerifiedTotalCountsOverlappingSourcesOnce() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        func sample(_ n: UInt64, _ start: String, _ end: String, _ count: Int, _ device: String) -> StepSample {
            StepSample(id: DerivedUUID.make(50, n), startMilliseconds: ISO8601.parse(start)!, endMilliseconds: ISO8601.parse(end)!,
                       count: count, sourceBundleId: "Jane\u{2019}s \(device)", sourceDeviceName: device)
        }
        let samples = [sample(1, "2026-06-10T21:00:00Z", "2026-06-10T21:30:00Z", 900, "iPhone"),       // the day before in Paris
                       sample(2, "2026-06-10T21:50:00Z", "2026-06-10T22:10:00Z", 400, "iPhone"),       // crosses Paris midnight: 200 today
                       sample(3, "2026-06-11T06:00:00Z", "2026-06-11T06:10:00Z", 1_000, "iPhone"),
                       sample(4, "2026-06-11T06:00:00Z", "2026-06-11T06:10:00Z", 1_100, "Apple Watch"), // the same walk
                       sample(5, "2026-06-11T09:00:00Z", "2026-06-11T09:10:00Z", 700, "iPhone")]       // after now
        let provider = FixedProvider(samples: samples, range: interval(0, 2_000_000_000_000))
        let repo = StepRepository(store: store, clock: VirtualClock(date("2026-06-11T08:00:00Z")), timeZone: { self.paris })
        #expect(try await repo.refreshVerified(from: provider).steps == 200 + 1_100)
        let both = try await MergedToday.steps(from: provider, now: date("2026-06-11T08:00:00Z"), timeZone: paris)
        #expect(both.merged == 1_300 && both.raw == 200 + 1_000 + 1_100)
    }

    @Test func goalArithmetic() {
        #expect(TodaySteps(day: 20260610, steps: 2_500, goal: 10_000).progress == 0.25)
        #expect(TodaySteps(day: 20260610, steps: 2_500, goal: 10_000).stepsRemaining == 7_500)
        #expect(!TodaySteps(day: 20260610, steps: 9_999, goal: 10_000).goalReached)
        let over = TodaySteps(day: 20260610, steps: 12_000, goal: 10_000)
        #expect(over.goalReached && over.progress == 1 && over.stepsRemaining == 0 && over.date == "2026-06-10")
    }

    @Test func compactionKeepsOnlyTheLatestScorePerDay() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try StepLogStore.open(dir.path)
            let repo = StepRepository(store: store, clock: VirtualClock(date("2026-06-10T08:00:00Z")), timeZone: { self.paris })
            for steps in stride(from: 100, through: 5_000, by: 100) { try repo.update(pedometer: steps) }
            try store.close()
        }
        _ = try StepLogStore.compact(directory: dir.path)
        var options = StoreOptions()
        options.readOnly = true
        let store = try StepLogStore.open(dir.path, options: options)
        let scores = try store.figures().byType[.dailyHighScore]
        #expect(scores?.records == 1 && store.highScore(day: 20260610)?.steps == 5_000)
    }
}

@Suite(.serialized) struct TodayCommandTests {
    let stepsync = builtProduct("stepsync")

    @Test func aSecondProcessSeesTheFirstOnesHighScore() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        let now = "2026-06-10T14:00:00Z"
        let first = try runProgram(stepsync, ["today", "--store", store, "--now", now, "--tz", "Europe/Paris",
                                              "--source", "mock:days=30,end=2026-06-11", "--live", "25000", "--json"])
        #expect(first.code == 0)
        let a = try #require(try JSONSerialization.jsonObject(with: Data(first.lines[0].utf8)) as? [String: Any])
        #expect(a["date"] as? String == "2026-06-10" && a["steps"] as? Int == 25_000 && a["goalReached"] as? Bool == true)
        let verified = try #require(a["verified"] as? Int), verifiedRaw = try #require(a["verifiedRaw"] as? Int)
        #expect(verified > 0 && verified < 25_000) // the mock's steps so far today
        #expect(verified <= verifiedRaw) // merged: the mock's Watch and iPhone counted once
        // Another process, no live reading: the saved high score holds.
        let second = try runProgram(stepsync, ["today", "--store", store, "--now", now, "--tz", "Europe/Paris",
                                               "--source", "mock:days=30,end=2026-06-11", "--json"])
        let b = try #require(try JSONSerialization.jsonObject(with: Data(second.lines[0].utf8)) as? [String: Any])
        #expect(b["steps"] as? Int == 25_000 && b["savedHighScore"] as? Int == 25_000)
        #expect(Set(b.keys).isSuperset(of: ["date", "steps", "goal", "goalReached", "progress", "stepsRemaining"]))
        // The next day starts from the verified steps only.
        let next = try runProgram(stepsync, ["today", "--store", store, "--now", "2026-06-10T23:30:00Z", "--tz", "Europe/Paris",
                                             "--source", "mock:days=30,end=2026-06-11", "--json"])
        let c = try #require(try JSONSerialization.jsonObject(with: Data(next.lines[0].utf8)) as? [String: Any])
        #expect(c["date"] as? String == "2026-06-11" && (c["steps"] as? Int ?? -1) < 25_000)
    }

    @Test func anExportSourceGivesTheVerifiedStepsOfItsLocalDay() throws {
        // Steps on 2021-03-01 at 09:00, 09:30, 10:00 and 11:00 -0800, and the
        // day before; at 10:15 Los Angeles time today so far is 100 + 200 + 400.
        let files = TemporaryDirectory("steplog-export")
        let records = [ExportTestRecord.step(minute: -24 * 60, count: 5_000), .step(minute: 0, count: 100),
                       .step(minute: 30, count: 200), .step(minute: 60, count: 400), .step(minute: 120, count: 800)]
        let zip = ExportTestZip()
        zip.add("apple_health_export/export.xml", ExportTestDocument.xml(records: records))
        let zipPath = try files.write("export.zip", zip.finished())
        let tmp = TemporaryDirectory()
        let common = ["--now", "2021-03-01T18:15:00Z", "--tz", "America/Los_Angeles", "--json"]
        let first = try runProgram(stepsync, ["today", "--store", tmp.sub("s"), "--source", zipPath, "--live", "650"] + common)
        #expect(first.code == 0)
        let a = try #require(try JSONSerialization.jsonObject(with: Data((first.lines.last ?? "").utf8)) as? [String: Any])
        #expect(a["date"] as? String == "2021-03-01" && a["verified"] as? Int == 700 && a["steps"] as? Int == 700)
        #expect(a["stepsRemaining"] as? Int == 9_300 && a["goalReached"] as? Bool == false)
        // The same export as plain XML, a lower live reading: still 700.
        let xmlPath = try files.write("export.xml", ExportTestDocument.xml(records: records))
        let second = try runProgram(stepsync, ["today", "--store", tmp.sub("s"), "--source", xmlPath, "--live", "10"] + common)
        let b = try #require(try JSONSerialization.jsonObject(with: Data((second.lines.last ?? "").utf8)) as? [String: Any])
        #expect(b["steps"] as? Int == 700 && b["savedHighScore"] as? Int == 700)
    }

    /// The README's `stepsync today --store ~/steps` on a store an export
    /// filled: today's steps are the stored samples', labelled so, and a
    /// store that also holds the mock's (left by an older version) never
    /// counts those.
    @Test func withoutASourceTheStoredSamplesCountNeverTheMocks() throws {
        let files = TemporaryDirectory("steplog-export")
        let records = [ExportTestRecord.step(minute: -24 * 60, count: 5_000), .step(minute: 0, count: 100),
                       .step(minute: 30, count: 200), .step(minute: 60, count: 400), .step(minute: 120, count: 800)]
        let xmlPath = try files.write("export.xml", ExportTestDocument.xml(records: records))
        let tmp = TemporaryDirectory()
        let store = tmp.sub("steps")
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", xmlPath]).code == 0)
        // At 10:15 Los Angeles time on 2021-03-01: 100 + 200 + 400 so far.
        let common = ["--now", "2021-03-01T18:15:00Z", "--tz", "America/Los_Angeles"]
        let text = try runProgram(stepsync, ["today", "--store", store] + common)
        #expect(text.code == 0)
        #expect(text.lines == ["2021-03-01 (America/Los_Angeles): 700 steps of 10,000 (7%), 9,300 to go",
                               "  pedometer - (no --live reading), verified from the store's samples (as of the last ingest) 700 (raw sum 700), saved high score 0"],
                "\(text.lines)")

        // The mock's samples of that day beside the export's, as an older stepsync mixed them.
        let mock = tmp.sub("mock")
        #expect(try runProgram(stepsync, ["ingest", "--store", mock, "--source", "mock:days=3,end=2021-03-02"]).code == 0)
        #expect(try runProgram(builtProduct("stepsync-store-fixture"), ["merge", store, "--from", mock]).code == 0)
        let json = try runProgram(stepsync, ["today", "--store", store, "--live", "650", "--json"] + common)
        let a = try #require(try JSONSerialization.jsonObject(with: Data((json.lines.last ?? "").utf8)) as? [String: Any])
        #expect(a["verified"] as? Int == 700 && a["verifiedRaw"] as? Int == 700 && a["verifiedFrom"] as? String == "store")
        #expect(a["steps"] as? Int == 700 && a["savedHighScore"] as? Int == 700)
    }

    @Test func theOldTimeZoneOptionStillWorksWithAWarning() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("s")
        let old = try runProgram(stepsync, ["today", "--store", store, "--now", "2026-06-10T23:30:00Z", "--time-zone", "Europe/Paris", "--json"],
                                 mergeStandardError: true)
        #expect(old.code == 0)
        #expect(old.lines.first == "stepsync today: warning: --time-zone is now --tz, as in stepsync daily; the old name goes away in the next release")
        #expect(old.lines.last?.contains("\"date\":\"2026-06-11\"") == true, "\(old.lines)")
        let both = try runProgram(stepsync, ["today", "--store", store, "--tz", "UTC", "--time-zone", "UTC"], mergeStandardError: true)
        #expect(both.code == 2 && both.lines.first?.contains("--tz and --time-zone (its old name) cannot go together") == true)
    }

    @Test func badOptionsAreUsageErrors() throws {
        let tmp = TemporaryDirectory()
        for bad in [["--tz", "Mars/Olympus"], ["--time-zone", "Mars/Olympus"], ["--now", "yesterday"], ["--live", "-5"], ["--goal", "0"]] {
            let r = try runProgram(stepsync, ["today", "--store", tmp.sub("s")] + bad, mergeStandardError: true)
            #expect(r.code == 2, "\(bad)")
        }
    }
}
