import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Whatever an import passes over, it says: a second export in the zip, an
/// ExportDate it cannot read (and so deletes nothing), and an export whose
/// every step record is skipped (exit 1, one line, nothing stored).
@Suite struct ExportPassedOverTests {
    let stepsync = builtProduct("stepsync")

    /// Two exports zipped together: the newer one is read even though the
    /// older one is larger; the summary names the other and its date.
    @Test func aZipWithTwoExportsReadsTheNewestAndNamesTheOther() throws {
        let dir = TemporaryDirectory("steplog-export")
        let newer = ExportTestDocument.xml((0..<10).map { ExportTestRecord.step(minute: $0, count: 10).xml },
                                           exportDate: "2021-06-30 21:14:05 -0700")
        let older = ExportTestDocument.xml((0..<40).map { ExportTestRecord.step(minute: $0, count: 20).xml },
                                           exportDate: "2021-04-01 08:00:00 -0700")
        let zip = ExportTestZip()
        zip.add("march/apple_health_export/export.xml", older)
        zip.add("apple_health_export/export_cda.xml", ExportZipTests.cda)
        zip.add("apple_health_export/export.xml", newer)
        let path = try dir.write("two.zip", zip.finished())
        let provider = try AppleHealthExportProvider(path: path)
        #expect(provider.summary.input == "zip:apple_health_export/export.xml")
        #expect(provider.allSamples().map(\.count) == Array(repeating: 10, count: 10))
        #expect(provider.summary.otherExportsInZip == [
            ExportZipOtherExport(entry: "march/apple_health_export/export.xml", exportDateMilliseconds: 1_617_289_200_000,
                                 bytes: Int64(older.utf8.count))])
        let notice = "the zip holds 2 exports: read 'apple_health_export/export.xml' (ExportDate 2021-07-01T04:14:05Z, the newest); "
            + "not read: 'march/apple_health_export/export.xml' (ExportDate 2021-04-01T15:00:00Z)"
        #expect(provider.summary.notices == [notice])
        let ingest = try runProgram(stepsync, ["ingest", "--store", dir.path + "/store", "--source", path], mergeStandardError: true)
        #expect(ingest.code == 0 && ingest.lines.contains("  note: " + notice), "\(ingest.lines)")
    }

    /// Equal dates go to the larger export; one whose date cannot be read ranks last.
    @Test func theChoiceBetweenExportsWithoutADifferenceInDate() throws {
        let dir = TemporaryDirectory("steplog-export")
        let small = ExportTestDocument.xml([ExportTestRecord.step(minute: 0, count: 1).xml])
        let large = ExportTestDocument.xml((0..<5).map { ExportTestRecord.step(minute: $0, count: 2).xml })
        let undated = ExportTestDocument.xml((0..<50).map { ExportTestRecord.step(minute: $0, count: 3).xml }, exportDate: "soon")
        let zip = ExportTestZip()
        zip.add("a/export.xml", small)
        zip.add("b/export.xml", undated)
        zip.add("c/export.xml", large)
        let provider = try AppleHealthExportProvider(path: try dir.write("three.zip", zip.finished()))
        #expect(provider.summary.input == "zip:c/export.xml")
        #expect(provider.summary.otherExportsInZip.map(\.entry) == ["a/export.xml", "b/export.xml"])
        #expect(provider.summary.otherExportsInZip.map(\.exportDateMilliseconds) == [1_625_112_845_000, nil])
        #expect(provider.summary.notices.first?.hasSuffix("not read: 'a/export.xml' (ExportDate 2021-07-01T04:14:05Z), "
                                                           + "'b/export.xml' (no ExportDate that can be read)") == true)
    }

    /// An ExportDate that is not a date: the export is read, nothing is
    /// deleted (it cannot say what it covers), and the import says so.
    @Test func anUnreadableExportDateIsSaidAndDeletesNothing() throws {
        let dir = TemporaryDirectory("steplog-export")
        let store = dir.path + "/store"
        let first = try dir.write("first.xml", ExportTestDocument.xml((0..<5).map { ExportTestRecord.step(minute: $0, count: 7).xml }))
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", first]).code == 0)
        let badDate = try dir.write("bad.xml", ExportTestDocument.xml([ExportTestRecord.step(minute: 9, count: 8).xml],
                                                                     exportDate: "2021/07/01 04:14"))
        let provider = try AppleHealthExportProvider(path: badDate)
        #expect(provider.exportDateMilliseconds == nil && provider.summary.unreadableExportDate == "\"2021/07/01 04:14\"")
        let notice = "its ExportDate \"2021/07/01 04:14\" cannot be read, so this import deletes nothing: "
            + "stored samples this export no longer holds are kept"
        #expect(provider.summary.notices == [notice])
        let ingest = try runProgram(stepsync, ["ingest", "--store", store, "--source", badDate], mergeStandardError: true)
        #expect(ingest.code == 0 && ingest.lines.contains("  note: " + notice), "\(ingest.lines)")
        #expect(ingest.lines.contains("  1 new, 0 changed, 0 deleted"), "\(ingest.lines)")
        // Without any ExportDate: the same, said so.
        let undated = try AppleHealthExportProvider(path: try dir.write("undated.xml", ExportTestDocument.xml([], exportDate: nil)))
        #expect(undated.summary.notices == ["it has no ExportDate, so this import deletes nothing: stored samples this export no longer holds are kept"])
    }

    /// Every step record skipped, for a format this reader does not know:
    /// exit 1, one line naming it, and no store created.
    @Test func anExportInAnUnknownFormatStoresNothingAndSaysWhy() throws {
        let dir = TemporaryDirectory("steplog-export")
        let records = (0..<3).map { i -> String in
            var r = ExportTestRecord.step(minute: i, count: 5)
            r.startDate = "2015/11/07 17:1\(i):24 +0100"
            return r.xml
        }
        let path = try dir.write("slashes.xml", ExportTestDocument.xml(records))
        let line = try #require(Self.lineOf("startDate=\"2015/11/07 17:10:24 +0100\"", in: path))
        let ingest = try runProgram(stepsync, ["ingest", "--store", dir.path + "/store", "--source", path], mergeStandardError: true)
        #expect(ingest.code == 1)
        #expect(ingest.lines.last == "stepsync ingest: \(path): none of its 3 step records could be read: this export's format is not supported: "
                + "bad startDate \"2015/11/07 17:10:24 +0100\" (line \(line)); nothing was stored")
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/store"))
    }

    /// Fractional values (an older export's, an app's) are kept to the
    /// thousandth, end to end: stored, exported as the wire writes them, and
    /// summed into the day's total (within a step of the values' sum); digits
    /// past the third decimal are rounded half to even, and said.
    @Test func fractionalValuesAreKeptToTheThousandth() throws {
        let dir = TemporaryDirectory("steplog-export")
        let store = dir.path + "/store"
        let values = ["2741.7", "12.5", "0.33351", "42", "0.0005"]
        let records = values.enumerated().map { i, value -> String in
            var r = ExportTestRecord.step(minute: 10 * i, count: 0, source: "Pedometer")
            r.value = value
            return r.xml
        }
        let path = try dir.write("fractions.xml", ExportTestDocument.xml(records))
        let ingest = try runProgram(stepsync, ["ingest", "--store", store, "--source", path], mergeStandardError: true)
        #expect(ingest.code == 0, "\(ingest.lines)")
        #expect(ingest.lines.contains("  note: 2 step values with more than three decimals rounded to the thousandth of a step"), "\(ingest.lines)")
        let export = try runProgram(stepsync, ["export", "--store", store])
        let counts = try export.lines.map { line -> String in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return "\(object["count"]!)"
        }
        #expect(Set(counts) == ["2741.7", "12.5", "0.334", "42", "0"])
        #expect(export.lines.contains { $0.contains("\"count\":2741.7,") } && export.lines.contains { $0.contains("\"count\":42,") })
        let daily = try runProgram(stepsync, ["daily", "--store", store, "--tz", "UTC", "--json"])
        let document = try #require(try JSONSerialization.jsonObject(with: Data(daily.lines.joined().utf8)) as? [String: Any])
        let day = try #require((document["days"] as? [[String: Any]])?.first)
        // 2741.7 + 12.5 + 0.334 + 42 + 0 = 2796.534 steps: 2797.
        #expect(day["raw"] as? Int == 2_797 && day["merged"] as? Int == 2_797)
    }

    /// Every step record skipped for its value (or the contract): exit 1, the first reason.
    @Test func anExportWhoseEveryRecordIsSkippedForItsValueFails() throws {
        let dir = TemporaryDirectory("steplog-export")
        let store = dir.path + "/store"
        let kept = try dir.write("kept.xml", ExportTestDocument.xml([ExportTestRecord.step(minute: 0, count: 5).xml]))
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", kept]).code == 0)
        let before = try storeFiles(store)
        let records = ["-3", "12.5.1"].enumerated().map { i, value -> String in
            var r = ExportTestRecord.step(minute: i, count: 0)
            r.value = value
            return r.xml
        }
        let path = try dir.write("fractions.xml", ExportTestDocument.xml(records))
        let line = try #require(Self.lineOf("value=\"-3\"", in: path))
        let ingest = try runProgram(stepsync, ["ingest", "--store", store, "--source", path, "--json"], mergeStandardError: true)
        #expect(ingest.code == 1)
        #expect(ingest.lines.last == "stepsync ingest: \(path): every one of its 2 step records was skipped, the first for: "
                + "value \"-3\" is negative (line \(line)); nothing was stored")
        #expect(try storeFiles(store) == before)
        // An export with no step records at all is not that: it imports (and is a snapshot).
        let none = try dir.write("none.xml", ExportTestDocument.xml([]))
        #expect(try AppleHealthExportProvider(path: none).summary.everyStepRecordSkipped(path: none) == nil)
    }

    static func lineOf(_ text: String, in path: String) -> Int? {
        let lines = (try? String(contentsOfFile: path, encoding: .utf8))?.components(separatedBy: "\n") ?? []
        return lines.firstIndex { $0.contains(text) }.map { $0 + 1 }
    }
}
