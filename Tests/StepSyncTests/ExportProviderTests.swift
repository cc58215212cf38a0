import Foundation
import StepLog
import Testing
@testable import StepSync

/// The provider contract (StepDataProvider's doc comment) on export data,
/// and the small parsers it is built from.
@Suite struct ExportProviderTests {
    /// ~2 400 samples from a Watch and a phone over 10 days, overlapping, some
    /// starting at the same millisecond.
    static func overlappingExport(_ dir: TemporaryDirectory) throws -> AppleHealthExportProvider {
        var random = SplitMix64(seed: 7)
        var records: [ExportTestRecord] = []
        for i in 0..<1_200 {
            let minute = i * 12 + Int(random.next() % 5)
            records.append(.step(minute: minute, count: Int(random.next() % 300), source: "Apple\u{00A0}Watch"))
            var phone = ExportTestRecord.step(minute: i % 10 == 0 ? minute : minute + 2, count: Int(random.next() % 500), source: "Simon\u{2019}s iPhone")
            phone.device = "<<HKDevice: 0x1c4896a80>, name:iPhone, manufacturer:Apple Inc., model:iPhone>"
            records.append(phone)
        }
        return try AppleHealthExportProvider(path: try dir.write("overlap.xml", ExportTestDocument.xml(records: records)))
    }

    @Test func aggregateEqualsTheSumOfRawForRandomIntervals() throws {
        let dir = TemporaryDirectory("steplog-export")
        let provider = try Self.overlappingExport(dir)
        #expect(provider.sampleCount == 2_400)
        var random = SplitMix64(seed: 99)
        let base = Double(ExportTestDates.base) / 1000
        for _ in 0..<500 {
            let start = base - 3_600 + Double(random.next() % 1_000_000)
            let length = Double(random.next() % 200_000)
            let interval = DateInterval(start: Date(timeIntervalSince1970: start), duration: length)
            let raw = provider.getRawStepSamples(for: interval)
            #expect(provider.getAggregatedStepCount(for: interval) == raw.reduce(0) { $0 + $1.count })
            let startMs = Milliseconds.from(interval.start), endMs = Milliseconds.from(interval.end)
            #expect(raw.allSatisfy { $0.startMilliseconds >= startMs && $0.startMilliseconds < endMs })
            let expected = provider.allSamples().filter { $0.startMilliseconds >= startMs && $0.startMilliseconds < endMs }
            #expect(raw == expected)
        }
    }

    @Test func rawSamplesAreSortedByStartThenUUID() throws {
        let dir = TemporaryDirectory("steplog-export")
        let samples = try Self.overlappingExport(dir).allSamples()
        let sameStart = zip(samples, samples.dropFirst()).filter { $0.0.startMilliseconds == $0.1.startMilliseconds }
        #expect(!sameStart.isEmpty)        // the fixture really has ties to order
        for (a, b) in zip(samples, samples.dropFirst()) {
            let ordered = a.startMilliseconds < b.startMilliseconds
                || (a.startMilliseconds == b.startMilliseconds && a.id.uuidString < b.id.uuidString)
            #expect(ordered)
        }
    }

    @Test func intervalsAreHalfOpenOnTheStart() async throws {
        let dir = TemporaryDirectory("steplog-export")
        let records = [ExportTestRecord.step(minute: 0, count: 1), .step(minute: 10, count: 10), .step(minute: 20, count: 100)]
        let provider = try AppleHealthExportProvider(path: try dir.write("edges.xml", ExportTestDocument.xml(records: records)))
        let t = { (minute: Int) in Milliseconds.date(ExportTestDates.base + Int64(minute) * 60_000) }
        // [0, 10) holds the first only: the sample starting exactly at 10 belongs to the next interval.
        #expect(provider.getAggregatedStepCount(for: DateInterval(start: t(0), end: t(10))) == 1)
        #expect(provider.getAggregatedStepCount(for: DateInterval(start: t(10), end: t(20))) == 10)
        #expect(provider.getAggregatedStepCount(for: DateInterval(start: t(0), end: t(20))) == 11)
        #expect(provider.getRawStepSamples(for: DateInterval(start: t(10), end: t(10))).isEmpty)
        // One millisecond wider takes it.
        let justPast = Milliseconds.date(ExportTestDates.base + 10 * 60_000 + 1)
        #expect(provider.getAggregatedStepCount(for: DateInterval(start: t(0), end: justPast)) == 11)
        // Through the protocol (async, as the pipeline calls it).
        let source: any StepDataProvider = provider
        #expect(try await source.getAggregatedStepCount(for: DateInterval(start: t(10), end: t(21))) == 110)
        #expect(try await source.getRawStepSamples(for: DateInterval(start: t(20), end: t(21))).map(\.count) == [100])
    }

    @Test func layeringRangeIsTheExportsOwnDataRangeInUTCDays() async throws {
        let dir = TemporaryDirectory("steplog-export")
        var first = ExportTestRecord.step(minute: 0, count: 1)
        first.startDate = "2013-01-01 23:30:00 -0800"     // 2013-01-02 07:30 UTC
        first.endDate = "2013-01-01 23:31:00 -0800"
        var last = ExportTestRecord.step(minute: 0, count: 2)
        last.startDate = "2025-01-01 00:30:00 +0100"      // 2024-12-31 23:30 UTC
        last.endDate = "2025-01-01 00:31:00 +0100"
        let provider = try AppleHealthExportProvider(path: try dir.write("range.xml", ExportTestDocument.xml(records: [last, first])))
        let expected = DateInterval(start: Date(timeIntervalSince1970: 1_357_084_800),   // 2013-01-02 00:00 UTC
                                    end: Date(timeIntervalSince1970: 1_735_689_600))     // 2025-01-01 00:00 UTC
        #expect(provider.exportRange(now: Date()) == expected)
        #expect(try await provider.layeringRange(now: Date()) == expected)
        // The pipeline calls it through the protocol: the export's range, not
        // the default "10 years back from now".
        let source: any StepDataProvider = provider
        #expect(try await source.layeringRange(now: Date()) == expected)
        #expect(provider.getAggregatedStepCount(for: expected) == 3)
    }

    @Test func datesParseExactlyOrNotAtAll() {
        #expect(ExportDateParser.milliseconds("1970-01-01 00:00:00 +0000") == 0)
        #expect(ExportDateParser.milliseconds("1969-12-31 23:59:59 +0000") == -1_000)
        let leapNoonMinus0130: Int64 = 951_825_600_000 + 5_400_000      // 2000-02-29 13:30 UTC
        #expect(ExportDateParser.milliseconds("2000-02-29 12:00:00 -0130") == leapNoonMinus0130)
        #expect(ExportDateParser.milliseconds("2100-02-29 00:00:00 +0000") == nil)     // not a leap year
        #expect(ExportDateParser.milliseconds("2021-13-01 00:00:00 +0000") == nil)
        #expect(ExportDateParser.milliseconds("2021-04-31 00:00:00 +0000") == nil)
        #expect(ExportDateParser.milliseconds("2021-04-30 24:00:00 +0000") == nil)
        #expect(ExportDateParser.milliseconds("2021-04-30 10:00:00 0000") == nil)
        #expect(ExportDateParser.milliseconds("2021-04-30 10:00:00 +00:00") == nil)
        #expect(ExportDateParser.milliseconds("2021-04-30T10:00:00 +0000") == nil)
        #expect(ExportDateParser.milliseconds("") == nil)
        // iOS 8's compact form, in records and in ExportDate alike.
        #expect(ExportDateParser.milliseconds("20000229120000-0130") == leapNoonMinus0130)
        #expect(ExportDateParser.milliseconds("19700101000000+0000") == 0)
        #expect(ExportDateParser.milliseconds("20151107171924+0100") == 1_446_913_164_000)
        for bad in ["21000229000000+0000", "20211301000000+0000", "20210430240000+0000", "20210430100000 0000",
                    "2021043010000+00000", "2021-04-30100000+00", "20210430100000+0060"] {
            #expect(ExportDateParser.milliseconds(bad) == nil, "\(bad)")
        }
        // Against Foundation's calendar for many instants and offsets.
        var random = SplitMix64(seed: 3)
        for _ in 0..<2_000 {
            let seconds = Int64(random.next() % 5_000_000_000) - 1_000_000_000
            let offsetMinutes = Int(random.next() % (26 * 60 + 1)) - 12 * 60
            let sign = offsetMinutes < 0 ? "-" : "+"
            let offset = sign + String(format: "%02d%02d", abs(offsetMinutes) / 60, abs(offsetMinutes) % 60)
            let text = ExportTestDates.text(seconds * 1_000, offset: offset)
            #expect(ExportDateParser.milliseconds(text) == seconds * 1_000, "\(text)")
        }
    }

    @Test func stepValuesAreDecimalsReadToTheThousandth() {
        func parse(_ text: String) -> ExportStepValue? {
            Array(text.utf8).withUnsafeBufferPointer { try? ExportStepValue.parse($0).get() }
        }
        func whole(_ text: String) -> UInt64? { parse(text).flatMap { $0.hasFraction ? nil : $0.thousandths / 1000 } }
        #expect(whole("12") == 12)
        #expect(whole("12.0") == 12)
        #expect(whole("12.") == 12)
        #expect(whole("12.000000") == 12)
        #expect(whole("0") == 0)
        #expect(whole("4294967295") == UInt64(UInt32.max))
        // Fractions are read to the thousandth; digits past it round half to even.
        #expect(parse("2741.7") == ExportStepValue(thousandths: 2_741_700, finerThanThousandths: false))
        #expect(parse("0.5") == ExportStepValue(thousandths: 500, finerThanThousandths: false))
        #expect(parse("12.345") == ExportStepValue(thousandths: 12_345, finerThanThousandths: false))
        #expect(parse("12.3450") == ExportStepValue(thousandths: 12_345, finerThanThousandths: false))
        #expect(parse("12.3456") == ExportStepValue(thousandths: 12_346, finerThanThousandths: true))
        #expect(parse("12.3454") == ExportStepValue(thousandths: 12_345, finerThanThousandths: true))
        #expect(parse("12.3445") == ExportStepValue(thousandths: 12_344, finerThanThousandths: true)) // half to even
        #expect(parse("12.3455") == ExportStepValue(thousandths: 12_346, finerThanThousandths: true))
        #expect(parse("12.34450001") == ExportStepValue(thousandths: 12_345, finerThanThousandths: true))
        #expect(parse("0.0005") == ExportStepValue(thousandths: 0, finerThanThousandths: true))
        #expect(parse("0.9999") == ExportStepValue(thousandths: 1_000, finerThanThousandths: true))
        #expect(parse("4294967295.999") == ExportStepValue(thousandths: 4_294_967_295_999, finerThanThousandths: false))
        for fractional in ["2741.7", "0.5", "12.0001"] { #expect(whole(fractional) == nil, "\(fractional)") }
        for large in ["4294967296", "4294967295.9995"] {
            let tooLarge = Array(large.utf8).withUnsafeBufferPointer { ExportStepValue.parse($0) }
            #expect(tooLarge == .failure(ExportStepValue.Problem(reason: "value \"\(large)\" is too large for a step count")))
        }
        for bad in ["-3", "abc", "", " 12", "1e3", "+4", ".5", "12.0.0", "0x10"] {
            #expect(parse(bad) == nil, "\(bad)")
        }
    }

    @Test func deviceNamesAndAddresses() {
        func name(_ device: String) -> String? {
            Array(device.utf8).withUnsafeBufferPointer { ExportDeviceString.name($0).map { String(decoding: $0, as: UTF8.self) } }
        }
        func stripped(_ device: String) -> String {
            var out: [UInt8] = []
            Array(device.utf8).withUnsafeBufferPointer { ExportDeviceString.withoutAddress($0, into: &out) }
            return String(decoding: out, as: UTF8.self)
        }
        let watch = "<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch2,4, software:4.3.1>"
        #expect(name(watch) == "Apple Watch")
        #expect(name("<<HKDevice: 0x1>, name:Bob, Jr.'s Watch, manufacturer:Apple Inc.>") == "Bob, Jr.'s Watch")
        #expect(name("<<HKDevice: 0x1>, name:Scale>") == "Scale")
        #expect(name("<<HKDevice: 0x1>, manufacturer:Withings>") == nil)
        #expect(name("<<HKDevice: 0x1>, name:, model:X>") == nil)
        #expect(name("iPhone") == nil)
        #expect(stripped(watch) == "<<HKDevice: >, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch2,4, software:4.3.1>")
        #expect(stripped("no address here") == "no address here")
    }

    @Test func entityDecoding() {
        #expect(ExportEntityDecoder.decode("&lt;&lt;HKDevice: 0x1&gt;, name:A&amp;B&gt;") == "<<HKDevice: 0x1>, name:A&B>")
        #expect(ExportEntityDecoder.decode("&#x41;&#66;&#x20AC;&#128512;") == "AB€😀")
        #expect(ExportEntityDecoder.decode("&#xD800; &#x110000; &bogus; & &#;") == "&#xD800; &#x110000; &bogus; & &#;")
        #expect(ExportEntityDecoder.decode("Apple\u{00A0}Watch \u{0B}") == "Apple\u{00A0}Watch \u{0B}")
    }
}

