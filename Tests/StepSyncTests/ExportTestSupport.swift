import Foundation
import StepLog
@testable import StepSync

/// The shared Apple Health fixtures, copied beside these tests (with their
/// licences), found from this file's path: no SwiftPM resources involved.
enum ExportFixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/apple-health")

    static var dogsheepPath: String { directory.appendingPathComponent("dogsheep-healthkit-to-sqlite_tests_export.xml").path }
    static var healthKit11DTDPath: String { directory.appendingPathComponent("aleksi-applehealth_healthkit11.dtd").path }

    static func text(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8)
    }
}

/// One `<Record>` for a generated export. Attribute values are given as they
/// should read after decoding; `xml` escapes them the way Apple does.
struct ExportTestRecord {
    var type = "HKQuantityTypeIdentifierStepCount"
    var sourceName = "Apple\u{00A0}Watch"
    var sourceVersion: String? = "8.5"
    var device: String? = "<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:8.5>"
    var unit: String? = "count"
    var creationDate: String? = "2021-03-01 09:10:00 -0800"
    var startDate: String? = "2021-03-01 09:00:00 -0800"
    var endDate: String? = "2021-03-01 09:05:00 -0800"
    var value: String? = "42"
    var metadata: [(String, String)] = []

    var xml: String {
        var text = "<Record type=\"\(Self.escape(type))\" sourceName=\"\(Self.escape(sourceName))\""
        if let sourceVersion { text += " sourceVersion=\"\(Self.escape(sourceVersion))\"" }
        if let device { text += " device=\"\(Self.escape(device))\"" }
        if let unit { text += " unit=\"\(Self.escape(unit))\"" }
        if let creationDate { text += " creationDate=\"\(creationDate)\"" }
        if let startDate { text += " startDate=\"\(startDate)\"" }
        if let endDate { text += " endDate=\"\(endDate)\"" }
        if let value { text += " value=\"\(Self.escape(value))\"" }
        if metadata.isEmpty { return text + "/>" }
        text += ">\n"
        for (key, value) in metadata {
            text += "  <MetadataEntry key=\"\(Self.escape(key))\" value=\"\(Self.escape(value))\"/>\n"
        }
        return text + " </Record>"
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }

    /// The UUID the provider must give this record, from the decoded fields
    /// and metadata.
    var expectedID: UUID {
        ExportRecordIdentity.uuid(type: type, sourceName: sourceName, sourceVersion: sourceVersion, device: device,
                                  unit: unit, creationDate: creationDate.flatMap(ExportDateParser.milliseconds),
                                  startDate: ExportDateParser.milliseconds(startDate!)!,
                                  endDate: ExportDateParser.milliseconds(endDate!)!, value: value,
                                  metadata: metadata.map { (key: $0.0, value: $0.1) })
    }

    /// The UUID the record had before metadata counted (the same as
    /// `expectedID` for a record without metadata).
    var legacyID: UUID {
        var plain = self
        plain.metadata = []
        return plain.expectedID
    }

    /// A step record `minutes` after 2021-03-01 09:00 -0800 with `count` steps.
    static func step(minute: Int, count: Int, source: String = "Apple\u{00A0}Watch", offset: String = "-0800") -> ExportTestRecord {
        var record = ExportTestRecord()
        record.sourceName = source
        record.startDate = ExportTestDates.text(ExportTestDates.base + Int64(minute) * 60_000, offset: offset)
        record.endDate = ExportTestDates.text(ExportTestDates.base + Int64(minute + 1) * 60_000, offset: offset)
        record.creationDate = ExportTestDates.text(ExportTestDates.base + Int64(minute + 2) * 60_000, offset: offset)
        record.value = String(count)
        return record
    }
}

/// Export-format date text for test instants.
enum ExportTestDates {
    /// 2021-03-01 17:00:00 UTC (09:00 -0800).
    static let base: Int64 = 1_614_618_000_000

    /// `yyyy-MM-dd HH:mm:ss ±HHMM` of `milliseconds` shown in UTC offset `offset` ("+0530").
    static func text(_ milliseconds: Int64, offset: String) -> String {
        let sign: Int64 = offset.hasPrefix("-") ? -1 : 1
        let digits = Array(offset.dropFirst())
        let minutes = Int64(String(digits[0..<2]))! * 60 + Int64(String(digits[2..<4]))!
        let local = Date(timeIntervalSince1970: Double(milliseconds / 1000 + sign * minutes * 60))
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: local)
        return String(format: "%04d-%02d-%02d %02d:%02d:%02d ", c.year!, c.month!, c.day!, c.hour!, c.minute!, c.second!) + offset
    }
}

/// Whole export documents for tests.
enum ExportTestDocument {
    /// The iOS 16 ("HealthKit Export Version: 12") DTD as Apple shipped it:
    /// the VisionPrescription, RightEye and LeftEye ATTLISTs are never closed.
    static let malformedIOS16DTD = SyntheticExport.iOS16DTD

    /// An export.xml: declaration, `doctype`, HealthData with ExportDate, Me,
    /// then `body` (lines), joined with `newline`.
    static func xml(_ body: [String], doctype: String? = malformedIOS16DTD, exportDate: String? = "2021-06-30 21:14:05 -0700",
                    newline: String = "\n") -> String {
        var lines = SyntheticExport.head(dtd: doctype, exportDate: exportDate)
        lines += body.map { " " + $0 }
        lines.append("</HealthData>")
        return lines.joined(separator: newline) + newline
    }

    static func xml(records: [ExportTestRecord], newline: String = "\n") -> String {
        xml(records.map(\.xml), newline: newline)
    }
}

/// A zip in memory, written by the shared `ExportZipWriter` (the one
/// `stepbench export generate` uses): stored or raw-deflate entries,
/// optionally with ZIP64 records even for small sizes, to exercise that path.
struct ExportTestZip {
    typealias Method = ExportZipWriter.Method

    private let output = ZipMemoryOutput()
    private let writer: ExportZipWriter

    init(zip64: Bool = false) {
        writer = ExportZipWriter(output: output, zip64: zip64)
    }

    func add(_ name: String, _ text: String, method: Method = .deflate) {
        add(name, Array(text.utf8), method: method)
    }

    func add(_ name: String, _ data: [UInt8], method: Method = .deflate) {
        try! writer.add(name, data, method: method)     // in memory: only zlib could fail
    }

    /// The complete zip: entries, central directory, (ZIP64 end + locator,) end record.
    func finished() -> [UInt8] {
        try! writer.close()
        return output.bytes
    }
}

/// Reads `path` with the provider, returning the error it throws (or nil).
func exportError(_ path: String) -> ExportError? {
    do {
        _ = try AppleHealthExportProvider(path: path)
        return nil
    } catch let error as ExportError {
        return error
    } catch {
        return nil
    }
}
