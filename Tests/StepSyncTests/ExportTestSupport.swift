import CZlib
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

/// A directory for one test's files, removed when the test is done with it.
final class ExportTemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory
            .appendingPathComponent("steplog-export-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` to `name` in this directory and returns the file's path.
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let file = path + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    func write(_ name: String, _ text: String) throws -> String {
        try write(name, Array(text.utf8))
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
    static let malformedIOS16DTD = """
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 12 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
        <!ATTLIST HealthData
          locale CDATA #REQUIRED
        >
        <!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
        <!ATTLIST Record
          type          CDATA #REQUIRED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT VisionPrescription ((RightEye|LeftEye|Attachment|MetadataEntry)*)>
        <!ATTLIST VisionPrescription
          type             CDATA #REQUIRED
          dateIssued       CDATA #REQUIRED
          expirationDate   CDATA #IMPLIED
          brand            CDATA #IMPLIED
        <!ELEMENT RightEye EMPTY>
        <!ATTLIST RightEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
        <!ELEMENT LeftEye EMPTY>
        <!ATTLIST LeftEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
        <!ELEMENT Attachment EMPTY>
        <!ATTLIST Attachment
          identifier        CDATA #IMPLIED
        >
        ]>
        """

    /// An export.xml: declaration, `doctype`, HealthData with ExportDate, Me,
    /// then `body` (lines), joined with `newline`.
    static func xml(_ body: [String], doctype: String? = malformedIOS16DTD, exportDate: String? = "2021-06-30 21:14:05 -0700",
                    newline: String = "\n") -> String {
        var lines = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>"]
        if let doctype { lines += doctype.components(separatedBy: "\n") }
        lines.append("<HealthData locale=\"en_US\">")
        if let exportDate { lines.append(" <ExportDate value=\"\(exportDate)\"/>") }
        lines.append(" <Me HKCharacteristicTypeIdentifierDateOfBirth=\"1990-02-02\" HKCharacteristicTypeIdentifierBiologicalSex=\"HKBiologicalSexMale\"/>")
        lines += body.map { " " + $0 }
        lines.append("</HealthData>")
        return lines.joined(separator: newline) + newline
    }

    static func xml(records: [ExportTestRecord], newline: String = "\n") -> String {
        xml(records.map(\.xml), newline: newline)
    }
}

/// A small in-memory zip writer for tests: stored or raw-deflate entries
/// (zlib `deflateInit2_`, windowBits -15) with their CRC-32 (zlib `crc32`),
/// optionally with ZIP64 records even for small sizes, to exercise that path.
struct ExportTestZip {
    enum Method { case stored, deflate }

    private(set) var bytes: [UInt8] = []
    private var central: [UInt8] = []
    private var count = 0
    var zip64 = false

    init(zip64: Bool = false) { self.zip64 = zip64 }

    mutating func add(_ name: String, _ text: String, method: Method = .deflate) {
        add(name, Array(text.utf8), method: method)
    }

    mutating func add(_ name: String, _ data: [UInt8], method: Method = .deflate) {
        let crc = UInt32(truncatingIfNeeded: data.withUnsafeBufferPointer { crc32(0, $0.baseAddress, UInt32($0.count)) })
        let payload = method == .deflate ? Self.deflate(data) : data
        let offset = bytes.count
        let nameBytes = Array(name.utf8)
        let methodCode: UInt16 = method == .deflate ? 8 : 0
        var zip64Sizes: [UInt8] = []
        if zip64 {
            zip64Sizes.exportLE16(1); zip64Sizes.exportLE16(16); zip64Sizes.exportLE64(UInt64(data.count)); zip64Sizes.exportLE64(UInt64(payload.count))
        }
        bytes.exportLE32(0x0403_4B50); bytes.exportLE16(zip64 ? 45 : 20); bytes.exportLE16(0x0800); bytes.exportLE16(methodCode)
        bytes.exportLE16(0); bytes.exportLE16(0x5821); bytes.exportLE32(crc)
        bytes.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(payload.count)); bytes.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(data.count))
        bytes.exportLE16(UInt16(nameBytes.count)); bytes.exportLE16(UInt16(zip64Sizes.count))
        bytes += nameBytes + zip64Sizes + payload

        var extra: [UInt8] = []
        if zip64 {
            extra.exportLE16(1); extra.exportLE16(24); extra.exportLE64(UInt64(data.count)); extra.exportLE64(UInt64(payload.count)); extra.exportLE64(UInt64(offset))
        }
        central.exportLE32(0x0201_4B50); central.exportLE16(0x031E); central.exportLE16(zip64 ? 45 : 20); central.exportLE16(0x0800)
        central.exportLE16(methodCode); central.exportLE16(0); central.exportLE16(0x5821); central.exportLE32(crc)
        central.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(payload.count)); central.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(data.count))
        central.exportLE16(UInt16(nameBytes.count)); central.exportLE16(UInt16(extra.count)); central.exportLE16(0); central.exportLE16(0); central.exportLE16(0)
        central.exportLE32(0); central.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(offset))
        central += nameBytes + extra
        count += 1
    }

    /// The complete zip: entries, central directory, (ZIP64 end + locator,) end record.
    func finished() -> [UInt8] {
        var out = bytes
        let directoryOffset = out.count
        out += central
        if zip64 {
            let zip64End = out.count
            out.exportLE32(0x0606_4B50); out.exportLE64(44); out.exportLE16(0x031E); out.exportLE16(45); out.exportLE32(0); out.exportLE32(0)
            out.exportLE64(UInt64(count)); out.exportLE64(UInt64(count)); out.exportLE64(UInt64(central.count)); out.exportLE64(UInt64(directoryOffset))
            out.exportLE32(0x0706_4B50); out.exportLE32(0); out.exportLE64(UInt64(zip64End)); out.exportLE32(1)
        }
        out.exportLE32(0x0605_4B50); out.exportLE16(0); out.exportLE16(0)
        out.exportLE16(zip64 ? 0xFFFF : UInt16(count)); out.exportLE16(zip64 ? 0xFFFF : UInt16(count))
        out.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(central.count)); out.exportLE32(zip64 ? 0xFFFF_FFFF : UInt32(directoryOffset))
        out.exportLE16(0)
        return out
    }

    /// Raw deflate of `data` in one call.
    static func deflate(_ data: [UInt8]) -> [UInt8] {
        let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        defer { deflateEnd(stream); stream.deallocate() }
        precondition(deflateInit2_(stream, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                                   Int32(MemoryLayout<z_stream>.size)) == Z_OK)
        var out = [UInt8](repeating: 0, count: Int(deflateBound(stream, UInt(data.count))) + 64)
        var input = data
        let produced = input.withUnsafeMutableBufferPointer { inBuffer in
            out.withUnsafeMutableBufferPointer { outBuffer -> Int in
                stream.pointee.next_in = inBuffer.baseAddress
                stream.pointee.avail_in = UInt32(inBuffer.count)
                stream.pointee.next_out = outBuffer.baseAddress
                stream.pointee.avail_out = UInt32(outBuffer.count)
                precondition(CZlib.deflate(stream, Z_FINISH) == Z_STREAM_END)
                return outBuffer.count - Int(stream.pointee.avail_out)
            }
        }
        return Array(out.prefix(produced))
    }
}

extension Array where Element == UInt8 {
    mutating func exportLE16(_ value: UInt16) { append(UInt8(value & 0xFF)); append(UInt8(value >> 8)) }
    mutating func exportLE32(_ value: UInt32) { exportLE16(UInt16(value & 0xFFFF)); exportLE16(UInt16(value >> 16)) }
    mutating func exportLE64(_ value: UInt64) { exportLE32(UInt32(value & 0xFFFF_FFFF)); exportLE32(UInt32(value >> 32)) }
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
