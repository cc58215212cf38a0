import Foundation
import StepLog
import Testing
@testable import StepSync

/// The XML side of the export provider: what real exports contain (the
/// malformed iOS 16 DTD, CRLF, U+000B, entities, non-ASCII names, nested
/// Correlation records, several UTC offsets) and what broken files look like.
@Suite struct ExportScannerTests {
    /// 1-based line of the first line of `text` containing `marker`.
    static func line(of marker: String, in text: String) -> Int {
        let lines = text.components(separatedBy: "\n")
        return lines.firstIndex { $0.contains(marker) }! + 1
    }

    @Test func malformedIOS16DTDBeforeTheDataIsSteppedOver() throws {
        let dir = TemporaryDirectory("steplog-export")
        let records = (0..<3).map { ExportTestRecord.step(minute: $0 * 10, count: 100 + $0) }
        let text = ExportTestDocument.xml(records: records)
        #expect(text.contains("<!ATTLIST RightEye") && !text.contains("sphereUnit        CDATA #IMPLIED\n>"))
        let provider = try AppleHealthExportProvider(path: try dir.write("export.xml", text))
        #expect(provider.allSamples().map(\.count) == [100, 101, 102])
        #expect(provider.allSamples().map(\.id) == records.map(\.expectedID))
        #expect(provider.summary.malformedStepRecords == 0)
        #expect(provider.summary.input == "xml")
    }

    @Test func crlfFileGivesTheSameSamplesAndCorrectLines() throws {
        let dir = TemporaryDirectory("steplog-export")
        var records = (0..<4).map { ExportTestRecord.step(minute: $0, count: 7 * $0 + 1) }
        var broken = ExportTestRecord.step(minute: 50, count: 1)
        broken.value = "many"
        records.append(broken)
        let lf = ExportTestDocument.xml(records: records)
        let crlf = ExportTestDocument.xml(records: records, newline: "\r\n")
        #expect(crlf.contains("\r\n"))
        let a = try AppleHealthExportProvider(path: try dir.write("lf.xml", lf))
        let b = try AppleHealthExportProvider(path: try dir.write("crlf.xml", crlf))
        #expect(a.allSamples() == b.allSamples())
        #expect(b.sampleCount == 4)
        let expectedLine = Self.line(of: "value=\"many\"", in: lf)
        #expect(b.summary.malformedExamples == [ExportSkippedRecord(line: expectedLine, reason: "value \"many\" is not a number")])
        #expect(a.summary.malformedExamples == b.summary.malformedExamples)
    }

    @Test func strayVerticalTabsAreToleratedAndKept() throws {
        let dir = TemporaryDirectory("steplog-export")
        var record = ExportTestRecord.step(minute: 3, count: 9)
        record.sourceName = "Run\u{0B}Keeper"
        record.device = nil
        record.metadata = [("note", "line\u{0B}break")]
        // U+000B as text between elements and between attributes, too.
        let tagWithTab = ExportTestRecord.step(minute: 4, count: 11).xml.replacingOccurrences(of: " sourceName=", with: "\u{0B}sourceName=")
        let text = ExportTestDocument.xml([record.xml, "\u{0B}", tagWithTab])
        let provider = try AppleHealthExportProvider(path: try dir.write("vt.xml", text))
        let samples = provider.allSamples()
        #expect(samples.count == 2)
        #expect(Array(samples[0].sourceBundleId.utf8) == Array("Run\u{0B}Keeper".utf8))
        #expect(samples[0].id == record.expectedID)
        #expect(samples[1].count == 11)
    }

    @Test func entitiesInAttributeValuesAreDecodedOthersKept() throws {
        let dir = TemporaryDirectory("steplog-export")
        let raw = "<Record type=\"HKQuantityTypeIdentifierStepCount\" sourceName=\"A&amp;B &lt;x&gt; &quot;q&quot; &apos;s&apos; &#65;&#x42;&#x1F600; &foo; &#0; &\" "
            + "device=\"&lt;&lt;HKDevice: 0x1f2e&gt;, name:Bob&apos;s Watch, manufacturer:Apple Inc., model:Watch&gt;\" unit=\"count\" "
            + "startDate=\"2021-03-01 09:00:00 -0800\" endDate=\"2021-03-01 09:01:00 -0800\" value=\"&#49;2\"/>"
        let provider = try AppleHealthExportProvider(path: try dir.write("entities.xml", ExportTestDocument.xml([raw])))
        let sample = try #require(provider.allSamples().first)
        #expect(sample.sourceBundleId == "A&B <x> \"q\" 's' AB\u{1F600} &foo; &#0; &")
        #expect(sample.sourceDeviceName == "Bob's Watch")
        #expect(sample.count == 12)
    }

    @Test func nonASCIISourceNamesAreByteExact() throws {
        let dir = TemporaryDirectory("steplog-export")
        let names = ["Apple\u{00A0}Watch", "Simon\u{2019}s iPhone", "Ærøskøbing Läufer 走る"]
        let records = names.enumerated().map { ExportTestRecord.step(minute: $0.offset, count: 5, source: $0.element) }
        let provider = try AppleHealthExportProvider(path: try dir.write("names.xml", ExportTestDocument.xml(records: records)))
        // The records are an Apple Watch's own: Apple's per-device bundle id, the name after it.
        #expect(provider.allSamples().map { Array($0.sourceBundleId.utf8) } == names.map { Array(("com.apple.health." + $0).utf8) })
        // NFC/NFD or NBSP-to-space "normalization" would break this.
        #expect(provider.allSamples()[0].sourceBundleId.utf8.contains(0xA0))
    }

    @Test func correlationNestedRecordsAndExactDuplicatesAreTakenOnce() throws {
        let dir = TemporaryDirectory("steplog-export")
        let top = ExportTestRecord.step(minute: 1, count: 30)
        let other = ExportTestRecord.step(minute: 2, count: 40)
        let body = [
            top.xml,
            "<Correlation type=\"HKCorrelationTypeIdentifierFood\" sourceName=\"Lose It!\" startDate=\"2021-03-01 09:00:00 -0800\" endDate=\"2021-03-01 09:00:00 -0800\">",
            "  <MetadataEntry key=\"HKFoodType\" value=\"Walk\"/>",
            "  " + top.xml,
            "</Correlation>",
            other.xml,
            other.xml,   // an exact duplicate printed twice
        ]
        let provider = try AppleHealthExportProvider(path: try dir.write("corr.xml", ExportTestDocument.xml(body)))
        #expect(provider.allSamples().map(\.count) == [30, 40])
        #expect(provider.summary.nestedStepRecordsSkipped == 1)
        #expect(provider.summary.duplicatesCollapsed == 1)
        #expect(provider.summary.recordsKept == 2)
    }

    @Test func recordsInsideWorkoutsAndOtherElementsAreNotTaken() throws {
        let dir = TemporaryDirectory("steplog-export")
        let kept = ExportTestRecord.step(minute: 1, count: 3)
        let hidden = ExportTestRecord.step(minute: 9, count: 1000)
        let body = [
            "<Workout workoutActivityType=\"HKWorkoutActivityTypeWalking\" sourceName=\"x\" startDate=\"2021-03-01 09:00:00 -0800\" endDate=\"2021-03-01 09:30:00 -0800\">",
            "  <WorkoutRoute sourceName=\"x\" startDate=\"2021-03-01 09:00:00 -0800\" endDate=\"2021-03-01 09:30:00 -0800\">",
            "    <Location date=\"2021-03-01 09:00:00 -0800\" latitude=\"37.7\" longitude=\"-122.4\"/>",
            "    " + hidden.xml,
            "  </WorkoutRoute>",
            "</Workout>",
            "<ActivitySummary dateComponents=\"2021-03-01\" activeEnergyBurned=\"590\"/>",
            "<ClinicalRecord type=\"HKClinicalTypeIdentifierLabResultRecord\" identifier=\"a&gt;b\" sourceName=\"Hospital\"/>",
            "<!-- a comment with <Record type=\"HKQuantityTypeIdentifierStepCount\"> inside -->",
            "<![CDATA[ <Record> ]]>",
            "<?steplog ignore me?>",
            "<Audiogram type=\"x\" note='single > quoted'/>",
            kept.xml,
        ]
        let provider = try AppleHealthExportProvider(path: try dir.write("nested.xml", ExportTestDocument.xml(body)))
        #expect(provider.allSamples().map(\.count) == [3])
    }

    @Test func typeNeedNotBeTheFirstAttributeAndQuotesMayBeSingle() throws {
        let dir = TemporaryDirectory("steplog-export")
        let raw = "<Record sourceName='Pedometer++' unit='count' value='77' type='HKQuantityTypeIdentifierStepCount' "
            + "startDate='2021-03-01 09:00:00 -0800' endDate='2021-03-01 09:02:00 -0800' device=\"name:Phone &gt; 2\"/>"
        let heart = "<Record sourceName=\"x\" value=\"60\" type=\"HKQuantityTypeIdentifierHeartRate\" startDate=\"2021-03-01 09:00:00 -0800\" endDate=\"2021-03-01 09:00:00 -0800\"/>"
        let provider = try AppleHealthExportProvider(path: try dir.write("order.xml", ExportTestDocument.xml([heart, raw])))
        let sample = try #require(provider.allSamples().first)
        #expect(provider.sampleCount == 1)
        #expect(sample.count == 77 && sample.sourceBundleId == "Pedometer++")
        #expect(sample.sourceDeviceName == "Phone > 2")
    }

    @Test func severalUTCOffsetsParseToExactInstants() throws {
        let dir = TemporaryDirectory("steplog-export")
        // The same wall-clock text means different instants under different offsets.
        let cases: [(String, Int64)] = [
            ("2021-03-14 01:59:59 -0800", 1_615_715_999_000),   // just before US DST
            ("2021-03-14 03:00:00 -0700", 1_615_716_000_000),   // one second later, after it
            ("2021-03-14 15:30:00 +0530", 1_615_716_000_000),   // the same instant in India
            ("2021-03-14 10:00:00 +0000", 1_615_716_000_000),
            ("2021-03-14 06:30:00 -0330", 1_615_716_000_000),
            ("2020-02-29 23:59:59 +1400", 1_582_970_399_000),   // leap day, the largest offset
        ]
        var body: [String] = []
        for (i, (date, _)) in cases.enumerated() {
            var record = ExportTestRecord.step(minute: 0, count: i + 1)
            record.startDate = date
            record.endDate = date
            record.creationDate = date
            body.append(record.xml)
        }
        let provider = try AppleHealthExportProvider(path: try dir.write("offsets.xml", ExportTestDocument.xml(body)))
        let byCount = Dictionary(uniqueKeysWithValues: provider.allSamples().map { ($0.count, $0.startMilliseconds) })
        for (i, (date, expected)) in cases.enumerated() {
            #expect(byCount[i + 1] == expected, "\(date)")
        }
    }

    @Test func emptyExportServesNothingOverOneDayEndingAtTheExportDate() async throws {
        let dir = TemporaryDirectory("steplog-export")
        let heart = ExportTestRecord(type: "HKQuantityTypeIdentifierHeartRate", value: "61")
        let provider = try AppleHealthExportProvider(path: try dir.write("empty.xml", ExportTestDocument.xml([heart.xml])))
        #expect(provider.sampleCount == 0)
        let exportDate = try #require(ExportDateParser.milliseconds("2021-06-30 21:14:05 -0700"))
        #expect(provider.summary.exportDateMilliseconds == exportDate)
        let range = provider.exportRange(now: Date())
        #expect(Milliseconds.from(range.end) == exportDate)
        #expect(Milliseconds.from(range.start) == exportDate - 86_400_000)
        let everything = DateInterval(start: Date(timeIntervalSince1970: 0), end: Date(timeIntervalSince1970: 4e9))
        #expect(provider.getAggregatedStepCount(for: everything) == 0)
        #expect(provider.getRawStepSamples(for: everything).isEmpty)

        // No ExportDate either, and a self-closed root: the day ending now.
        let bare = try AppleHealthExportProvider(path: try dir.write("bare.xml", "<?xml version=\"1.0\"?>\n<HealthData locale=\"en_US\"/>\n"))
        let now = Date(timeIntervalSince1970: 1_700_000_000.5)
        let bareRange = bare.exportRange(now: now)
        #expect(Milliseconds.from(bareRange.end) == Milliseconds.from(now))
        #expect(bareRange.duration == 86_400)
        #expect(bare.sourceIdentity == provider.sourceIdentity)   // both: no step data
    }

    @Test func malformedStepRecordsAreSkippedCountedAndLocated() throws {
        let dir = TemporaryDirectory("steplog-export")
        func broken(_ minute: Int, _ change: (inout ExportTestRecord) -> Void) -> ExportTestRecord {
            var record = ExportTestRecord.step(minute: minute, count: 1)
            change(&record)
            return record
        }
        let bad: [(ExportTestRecord, String)] = [
            (broken(10) { $0.startDate = nil }, "missing startDate"),
            (broken(11) { $0.value = "abc" }, "value \"abc\" is not a number"),
            (broken(12) { $0.startDate = "2021-02-30 10:00:00 -0800" }, "bad startDate \"2021-02-30 10:00:00 -0800\""),
            (broken(13) { $0.value = "1.2.5" }, "value \"1.2.5\" is not a number"),
            (broken(14) { $0.value = "-3" }, "value \"-3\" is negative"),
            (broken(15) { $0.endDate = nil }, "missing endDate"),
            (broken(16) { $0.value = nil }, "missing value"),
        ]
        var body = [ExportTestRecord.step(minute: 0, count: 5).xml]
        for (record, _) in bad { body.append(record.xml) }
        body.append(ExportTestRecord.step(minute: 20, count: 6).xml)
        body.append(broken(21) { $0.value = "12.0" }.xml)     // whole: kept
        body.append(broken(22) { $0.value = "12.5" }.xml)     // a fraction: kept, in thousandths
        body.append(broken(23) { $0.value = "0.33333" }.xml)  // past the thousandth: rounded
        let text = ExportTestDocument.xml(body)
        let provider = try AppleHealthExportProvider(path: try dir.write("malformed.xml", text))
        #expect(provider.allSamples().map(\.countThousandths) == [5_000, 6_000, 12_000, 12_500, 333])
        #expect(provider.summary.malformedStepRecords == 7)
        #expect(provider.summary.fractionalStepRecords == 2 && provider.summary.roundedStepRecords == 1)
        #expect(provider.summary.notices == ["1 step value with more than three decimals rounded to the thousandth of a step"])
        // Of them: three bad values, four missing or bad dates and values.
        #expect(provider.summary.unreadableFieldStepRecords == 4)
        let recordLines = text.components(separatedBy: "\n").enumerated()
            .filter { $0.element.contains("HKQuantityTypeIdentifierStepCount") }.map { $0.offset + 1 }
        let expected = zip(recordLines.dropFirst(), bad).prefix(5).map { ExportSkippedRecord(line: $0.0, reason: $0.1.1) }
        #expect(provider.summary.malformedExamples == expected)
    }

    @Test func xmlThatIsNotAHealthExportIsRejected() throws {
        let dir = TemporaryDirectory("steplog-export")
        let path = try dir.write("page.xml", "<?xml version=\"1.0\"?>\n<!-- hello -->\n<html><body>steps</body></html>\n")
        #expect(exportError(path) == .notHealthExport(path: path, found: "the root element is <html>, not <HealthData>", line: 3))
        let description = try #require(exportError(path)?.description)
        #expect(description.hasPrefix(path + ": not an Apple Health export") && !description.contains("\n"))

        let textPath = try dir.write("text.xml", "<?xml version=\"1.0\"?>\nsteps: 1000\n")
        #expect(exportError(textPath) == .notHealthExport(path: textPath, found: "text before the root element", line: 2))
    }

    @Test func aFileThatIsNeitherZipNorXMLIsRejected() throws {
        let dir = TemporaryDirectory("steplog-export")
        let pdf = try dir.write("export.zip", "%PDF-1.4\n%âãÏÓ\n")
        #expect(exportError(pdf) == .notZipOrXML(path: pdf, found: "it starts with bytes 25 50 44 46 2D 31 2E 34 \"%PDF-1.4\""))
        #expect(exportError(pdf)?.description == "\(pdf): not a zip or XML file (it starts with bytes 25 50 44 46 2D 31 2E 34 \"%PDF-1.4\")")
        let empty = try dir.write("empty.xml", [])
        #expect(exportError(empty) == .notZipOrXML(path: empty, found: "the file is empty"))
        let missing = dir.path + "/nope.zip"
        #expect(exportError(missing) == .unreadable(path: missing, operation: "open", errno: ENOENT))
        // A UTF-8 BOM and whitespace before '<' are fine.
        let bom = try dir.write("bom.xml", [0xEF, 0xBB, 0xBF, 0x0A, 0x20] + Array(ExportTestDocument.xml(records: [.step(minute: 0, count: 4)]).utf8))
        #expect(try AppleHealthExportProvider(path: bom).sampleCount == 1)
    }

    @Test func recordsAcrossChunkBoundariesAreAllKept() throws {
        let dir = TemporaryDirectory("steplog-export")
        // ~9 MB: records cut by every 2 MiB chunk boundary, of varying lengths.
        var body: [String] = []
        var expectedTotal = 0
        var kept = 0
        for i in 0..<24_000 {
            if i % 3 == 0 {
                var record = ExportTestRecord.step(minute: i, count: i % 500)
                record.metadata = Array(repeating: ("HKMetadataKeySyncIdentifier", String(repeating: "x", count: i % 97)), count: i % 4)
                body.append(record.xml)
                expectedTotal += i % 500
                kept += 1
            } else {
                body.append(ExportTestRecord(type: "HKQuantityTypeIdentifierHeartRate", startDate: ExportTestDates.text(ExportTestDates.base + Int64(i) * 60_000, offset: "+0100"),
                                             value: String(60 + i % 40), metadata: [("HKMetadataKeyHeartRateMotionContext", "0")]).xml)
            }
        }
        var late = ExportTestRecord.step(minute: 30_000, count: 1)
        late.value = "late"
        body.append(late.xml)          // line numbers must survive every chunk boundary
        let text = ExportTestDocument.xml(body)
        #expect(text.utf8.count > 4 * ExportReader.chunkCapacity)
        let provider = try AppleHealthExportProvider(path: try dir.write("big.xml", text))
        #expect(provider.sampleCount == kept)
        #expect(provider.allSamples().reduce(0) { $0 + $1.count } == expectedTotal)
        #expect(provider.summary.xmlBytes == Int64(text.utf8.count))
        #expect(provider.summary.malformedExamples == [ExportSkippedRecord(line: Self.line(of: "value=\"late\"", in: text),
                                                                           reason: "value \"late\" is not a number")])
    }

    @Test func elementsLargerThanAChunkAreHandled() throws {
        let dir = TemporaryDirectory("steplog-export")
        var huge = ExportTestRecord.step(minute: 1, count: 8)
        huge.metadata = [("blob", String(repeating: "0123456789", count: 500_000))]   // 5 MB inside a step record
        var longName = ExportTestRecord.step(minute: 2, count: 9)
        longName.sourceName = String(repeating: "n", count: 3_000_000)                // 3 MB attribute: too long to store
        let body = [
            ExportTestRecord.step(minute: 0, count: 7).xml,
            "<!-- " + String(repeating: "comment ", count: 700_000) + "-->",       // 5.6 MB comment
            huge.xml,
            longName.xml,
            ExportTestRecord.step(minute: 3, count: 10).xml,
        ]
        let provider = try AppleHealthExportProvider(path: try dir.write("huge.xml", ExportTestDocument.xml(body)))
        #expect(provider.allSamples().map(\.count) == [7, 8, 10])
        #expect(provider.summary.malformedExamples.isEmpty)
        #expect(provider.summary.outOfContractExamples.map(\.reason) == ["sourceBundleId is 3000000 bytes (at most 512)"])
    }

    @Test func progressIsReportedAndEndsWithTheTotals() throws {
        let dir = TemporaryDirectory("steplog-export")
        let records = (0..<100).map { ExportTestRecord.step(minute: $0, count: 1) }
        let path = try dir.write("progress.xml", ExportTestDocument.xml(records: records))
        let seen = ExportProgressLog()
        let provider = try AppleHealthExportProvider(path: path) { seen.append($0) }
        let last = try #require(seen.values.last)
        #expect(last.bytesRead == provider.summary.bytesRead && last.bytesRead == last.totalBytes)
        #expect(last.xmlBytes == provider.summary.xmlBytes)
        #expect(last.stepRecordsKept == 100)
    }
}

/// Collects progress reports (the callback is `@Sendable`).
final class ExportProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [ExportReadProgress] = []

    func append(_ progress: ExportReadProgress) {
        lock.lock()
        stored.append(progress)
        lock.unlock()
    }

    var values: [ExportReadProgress] {
        lock.lock()
        defer { lock.unlock() }
        return stored
    }
}
