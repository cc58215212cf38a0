import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The synthetic export of each era in Tests/Fixtures/export-eras (its README
/// says what each holds), and a store an earlier build wrote
/// (Tests/Fixtures/stores): what is read, what is skipped and said, which
/// sources are Apple's own devices.
@Suite struct ExportEraTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static func era(_ name: String) -> String { fixtures.appendingPathComponent("export-eras/\(name)").path }

    static func milliseconds(_ rfc3339: String) -> Int64 {
        Milliseconds.from(ISO8601DateFormatter().date(from: rfc3339)!)
    }

    /// Sources (bundle id, device name) by day, highest first, with their merged steps, by the default priority.
    static func ranking(_ samples: [StepSample], days: ClosedRange<Int64>) -> [[String]] {
        let totals = DailyMerge.totals(SampleTable(samples), priority: .default, calendar: LocalDayCalendar(identifier: "UTC")!,
                                       days: days)
        return totals.days.map { day in day.sources.map { "\($0.source.bundleId) \($0.merged)" } }
    }

    @Test func iOS8CompactDatesSourceNamesAndMetadataAttributes() throws {
        let provider = try AppleHealthExportProvider(path: Self.era("ios8-2014.xml"))
        let s = provider.summary
        #expect(provider.sampleCount == 13)
        #expect(s.exportDateMilliseconds == 1_426_957_507_000)                  // 20150321180507+0100
        #expect(s.malformedStepRecords == 0 && s.fractionalStepRecords == 2 && s.roundedStepRecords == 0)
        // The two Health Mate step records; the BodyMass one is not a step record.
        #expect(s.lenientStepRecords == 2)
        #expect(s.notices == [
            "2 step records read leniently (words in the tag that are not name=\"value\", such as an iOS 8 export's metadata keys with spaces)"])
        let samples = provider.allSamples()
        #expect(Set(samples.map(\.sourceBundleId)) == ["Lenas iPhone", "Health Mate", "Misfit"])
        #expect(samples.allSatisfy { $0.sourceDeviceName == nil })
        #expect(samples.first?.startMilliseconds == 1_414_215_000_000)         // 20141025073000+0200
        // The same wall time on either side of the DST change: an hour apart.
        let night = samples.filter { $0.count == 35 || $0.count == 41 }.map(\.startMilliseconds)
        #expect(night == [1_414_282_200_000, 1_414_285_800_000])
        let counts: [Int64] = [842, 1120, 96, 35, 41, 1307, 1744, 2210, 318, 655, 904].map { $0 * 1000 } + [2_741_700, 12_250]
        #expect(samples.map(\.countThousandths).reduce(0, +) == counts.reduce(0, +))
    }

    /// A word right before a step attribute may be the head of a metadata key
    /// (`Daily Steps value="…"`): Apple writes a record's own attributes
    /// first, so the first `value` stands. A word with a `/` is still a word.
    @Test func aMetadataKeyEndingInAStepAttributeDoesNotReplaceIt() throws {
        let dir = TemporaryDirectory("steplog-export")
        let head = "<Record type=\"HKQuantityTypeIdentifierStepCount\" source=\"Scale\" unit=\"count\" startDate=\"20141027090000+0100\" endDate=\"20141027100000+0100\""
        let text = ExportTestDocument.xml([head + " value=\"12\" Daily Steps value=\"13\" Scale unit=\"steps\"/>",
                                           head.replacingOccurrences(of: "20141027090000", with: "20141027080000") + " value=\"14\" Withings Link/ID=\"5\"/>"],
                                          doctype: nil, exportDate: "20141101000000+0100")
        let provider = try AppleHealthExportProvider(path: try dir.write("ambiguous.xml", text))
        #expect(provider.allSamples().map(\.count) == [14, 12])
        #expect(provider.summary.lenientStepRecords == 2 && provider.summary.malformedStepRecords == 0)
        // The identity is the record's own attributes': as if the metadata were not there.
        var plain = ExportTestRecord(sourceName: "Scale", sourceVersion: nil, device: nil, unit: "count", creationDate: nil,
                                     startDate: "20141027090000+0100", endDate: "20141027100000+0100", value: "12")
        plain.type = "HKQuantityTypeIdentifierStepCount"
        #expect(provider.allSamples().last?.id == plain.expectedID)
    }

    @Test func iOS9AppleDevicesAreKnownByTheirOwnRecords() throws {
        let provider = try AppleHealthExportProvider(path: Self.era("ios9-2016.xml"))
        #expect(provider.sampleCount == 10)
        var sources: [String: Set<String?>] = [:]
        for s in provider.allSamples() { sources[s.sourceBundleId, default: []].insert(s.sourceDeviceName) }
        #expect(sources == [
            // Its records from before iOS 9 have no device: they take the one its later records name.
            "com.apple.health.Tom’s iPhone": ["iPhone"],
            "com.apple.health.Tom’s Apple Watch": ["Apple Watch"],
            // Stamped with the iPhone's device, but entered by hand, and an app (its own version).
            "Health": ["iPhone"],
            "Pedometer++": ["iPhone"],
        ])
    }

    @Test func iOS12DuplicatesSyncVersionsAndCorrelations() throws {
        let provider = try AppleHealthExportProvider(path: Self.era("ios12-2019.xml"))
        let s = provider.summary
        #expect(provider.sampleCount == 7)
        #expect(s.duplicatesCollapsed == 1 && s.syncVersionsReplaced == 1 && s.malformedStepRecords == 0)
        #expect(s.notices.isEmpty)
        let garmin = provider.allSamples().filter { $0.sourceBundleId == "Garmin Connect" }
        #expect(garmin.map(\.count) == [3388] && garmin.first?.sourceDeviceName == "vívoactive 3")
        #expect(provider.allSamples().filter { $0.sourceBundleId.hasPrefix("com.apple.health.") }.count == 6)
    }

    /// iPhones and Watches the person renamed rank above the apps, the Watch
    /// above the iPhone; an app stamped with the iPhone's device is an app.
    @Test func iOS16RenamedDevicesRankByWhatTheyAre() throws {
        let provider = try AppleHealthExportProvider(path: Self.era("ios16-2022.xml"))
        #expect(provider.sampleCount == 11)
        let days = LocalDayCalendar.parse(date: "2022-11-05")!...LocalDayCalendar.parse(date: "2022-11-06")!
        // 11-05, by hand: Accupedo 07:30-08:30 3300, Ryan Phone 07:58-08:12 1450, Dane Watch 2 08:00-08:09 1190;
        // Ryan Phone 12:00-12:09 640 over Accupedo 12:00-13:00 1800. The Watch keeps 1190; the iPhone
        // F(2 min) = 207 and 1450 - F(11 min) = 311, and 640; Accupedo F(28 min) = 1540, 3300 - 2310 = 990, 1800 - 270 = 1530.
        #expect(Self.ranking(provider.allSamples(), days: days) == [
            ["com.apple.health.Dane Watch 2 1190", "com.apple.health.Ryan Phone 1158", "Accupedo 4060"],
            ["com.apple.health.Dane Watch 4 1920", "com.apple.health.Dxi 2070", "Pacer 1542"]])
    }

    /// A store 2c4e209 wrote from the iOS 16 export opens and reads as it did
    /// then (its samples carry `sourceName` as bundle id, ranked by name);
    /// importing the same export rewrites the Apple devices' samples once,
    /// deleting and adding nothing, and they then rank by what they are.
    @Test func aStoreWrittenBefore2c4e209OpensUnchangedAndIsUpgradedByAnImport() throws {
        let golden = Self.fixtures.appendingPathComponent("stores/export-ios16-2c4e209")
        let dir = TemporaryDirectory("steplog-export")
        let store = dir.path + "/store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: golden.appendingPathComponent("000000000001.log").path,
                                         toPath: store + "/000000000001.log")
        let stepsync = builtProduct("stepsync")
        let before = try storeFiles(store)
        let export = try runProgram(stepsync, ["export", "--store", store])
        #expect(export.code == 0)
        #expect(export.lines == (try String(contentsOf: golden.appendingPathComponent("export.jsonl"), encoding: .utf8))
            .split(separator: "\n").map(String.init))
        let daily = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--by-source", "--json"])
        #expect(try canonicalJSON(bytes: Array(daily.lines.joined().utf8))
                == canonicalJSON(bytes: Array(try Data(contentsOf: golden.appendingPathComponent("daily-utc.json")))))
        #expect(try storeFiles(store) == before)

        let ingest = try runProgram(stepsync, ["ingest", "--store", store, "--source", Self.era("ios16-2022.xml")])
        #expect(ingest.code == 0)
        // Ryan Phone 2, Dane Watch 2 1, Dane Watch 4 2, Dxi 2: their bundle id changed, their ids did not.
        #expect(ingest.lines.contains("  0 new, 7 changed, 0 deleted"), "\(ingest.lines)")
        let s = try KillOutcome.readOnly(store)
        defer { try? s.close() }
        let provider = try AppleHealthExportProvider(path: Self.era("ios16-2022.xml"))
        #expect(try liveSamples(s) == Dictionary(uniqueKeysWithValues: provider.allSamples().map { ($0.id, $0) }))
        #expect(s.counts.unsyncedSamples == 11)
    }
}
