import Foundation
import StepLog
import Testing
@testable import StepSync

/// The real export fragments in Fixtures/apple-health (see its README).
@Suite struct ExportFixtureTests {
    @Test func dogsheepFixtureHasNoStepRecords() throws {
        let provider = try AppleHealthExportProvider(path: ExportFixtures.dogsheepPath)
        #expect(provider.sampleCount == 0)
        #expect(provider.summary.malformedStepRecords == 0)
        // <ExportDate value="2019-07-19 10:36:11 -0700"/> = 17:36:11 UTC.
        #expect(provider.summary.exportDateMilliseconds == 1_563_557_771_000)
        let range = provider.exportRange(now: Date())
        #expect(Milliseconds.from(range.end) == 1_563_557_771_000)
        #expect(range.duration == 86_400)
        #expect(provider.getAggregatedStepCount(for: range) == 0)
    }

    /// The fixture with step records added before `</HealthData>`: one with
    /// the fixture's own Apple Watch source and device (NBSP in the name,
    /// entity-escaped device), one with its curly-apostrophe iPhone, one
    /// from a source with no device.
    @Test func dogsheepFixtureWithAddedStepRecords() throws {
        let dir = TemporaryDirectory("steplog-export")
        let fixture = try ExportFixtures.text(ExportFixtures.dogsheepPath)
        let watch = ExportTestRecord(sourceName: "Apple\u{00A0}Watch", sourceVersion: "4.3.1",
                                     device: "<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple, model:Watch, hardware:Watch2,4, software:4.3.1>",
                                     creationDate: "2018-09-10 02:47:35 -0700", startDate: "2018-09-10 02:28:55 -0700",
                                     endDate: "2018-09-10 02:38:55 -0700", value: "72")
        let phone = ExportTestRecord(sourceName: "Simon\u{2019}s iPhone", sourceVersion: "10.1.1",
                                     device: "<<HKDevice: 0x1c4896a80>, name:iPhone, manufacturer:Apple, model:iPhone, hardware:iPhone9,3, software:10.1.1>",
                                     creationDate: "2016-11-14 07:40:00 -0700", startDate: "2016-11-14 07:25:41 -0700",
                                     endDate: "2016-11-14 07:30:52 -0700", value: "611")
        let scale = ExportTestRecord(sourceName: "Health Mate", sourceVersion: nil, device: nil,
                                     creationDate: nil, startDate: "2016-04-18 08:25:32 -0700", endDate: "2016-04-18 08:25:32 -0700", value: "0")
        let added = [watch, phone, scale].map { "    " + $0.xml }.joined(separator: "\n")
        let text = fixture.replacingOccurrences(of: "</HealthData>", with: added + "\n</HealthData>")
        let provider = try AppleHealthExportProvider(path: try dir.write("dogsheep-plus.xml", text))

        let samples = provider.allSamples()
        #expect(samples.count == 3)
        #expect(samples.map(\.count) == [0, 611, 72])              // sorted by start
        // The iPhone's and the Watch's own records (software = sourceVersion) carry Apple's per-device bundle id.
        #expect(samples.map(\.sourceBundleId) == ["Health Mate", "com.apple.health.Simon\u{2019}s iPhone", "com.apple.health.Apple\u{00A0}Watch"])
        #expect(samples.map(\.sourceDeviceName) == [nil, "iPhone", "Apple Watch"])
        #expect(samples[2].startMilliseconds == 1_536_571_735_000)
        #expect(samples[2].endMilliseconds == 1_536_572_335_000)
        #expect(samples.map(\.id) == [scale, phone, watch].map(\.expectedID))
        // The fixture's heart-rate record, workout and summaries are not steps.
        #expect(provider.summary.recordsKept == 3)
        let range = provider.exportRange(now: Date())
        #expect(Milliseconds.from(range.start) == 1_460_937_600_000)   // 2016-04-18 00:00 UTC
        #expect(Milliseconds.from(range.end) == 1_536_624_000_000)     // 2018-09-11 00:00 UTC
    }

    /// Export Version 11's inline DTD (the aleksi fixture) in front of the data.
    @Test func healthKit11InlineDTD() throws {
        let dir = TemporaryDirectory("steplog-export")
        let dtd = try ExportFixtures.text(ExportFixtures.healthKit11DTDPath)
        let records = (0..<3).map { ExportTestRecord.step(minute: $0, count: 10 * ($0 + 1)) }
        let text = ExportTestDocument.xml(records.map(\.xml), doctype: "<!DOCTYPE HealthData [\n" + dtd + "]>")
        let provider = try AppleHealthExportProvider(path: try dir.write("v11.xml", text))
        #expect(provider.allSamples().map(\.count) == [10, 20, 30])
    }

    @Test func fixturesKeepTheirLicencesBeside() {
        let licences = ExportFixtures.directory.appendingPathComponent("LICENSES").path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: licences)) ?? []
        #expect(names.contains("dogsheep-healthkit-to-sqlite_LICENSE_Apache-2.0.txt"))
        #expect(names.contains("aleksi-applehealth_LICENSE_MIT.txt"))
    }
}
