/// Why an Apple Health export cannot be read. Every case renders as one line
/// that names the file and where in it (a line of the XML, or a byte offset of
/// the input file) the problem is, in `description` and nowhere else.
///
/// A single malformed step record is not an error: it is skipped and counted
/// in `ExportReadSummary`.
public enum ExportError: Error, CustomStringConvertible, Equatable, Sendable {
    /// open/read/fstat failed.
    case unreadable(path: String, operation: String, errno: Int32)
    /// The content is neither a zip (`PK\x03\x04`) nor XML (`<`, after an optional BOM and whitespace).
    case notZipOrXML(path: String, found: String)
    /// A zip whose `.xml` entries do not include one whose root element is `<HealthData>`.
    case noHealthExportInZip(path: String, xmlEntriesLookedAt: Int)
    /// The zip ends early: its end-of-central-directory record or an entry's data is missing.
    case truncatedZip(path: String, offset: Int64, detail: String)
    /// A zip structure that cannot be read (bad signature, unsupported method, encrypted entry, deflate data error).
    case damagedZip(path: String, offset: Int64, detail: String)
    /// The chosen entry inflated to the size it declares, but its CRC-32 differs.
    case badCRC(path: String, entry: String, offset: Int64, expected: UInt32, actual: UInt32)
    /// The XML ends before its root element is closed: the file was cut.
    /// `inside` names the innermost thing left open ("<Record> element",
    /// "comment", …), `line` the line it starts on, and `end` where the XML ends.
    case truncatedXML(path: String, inside: String, line: Int, end: ExportXMLPosition)
    /// The XML is not well-formed where it matters to the reader: end tags
    /// that do not match, an unclosed element, a value whose quote is never
    /// closed, content after the root element. `at` is the real problem's
    /// place (the unclosed element's start tag, the unterminated attribute).
    case malformedXML(path: String, at: ExportXMLPosition, problem: ExportXMLProblem)
    /// XML whose root element is not `<HealthData>` (or that has no element at all).
    case notHealthExport(path: String, found: String, line: Int)

    public var description: String {
        switch self {
        case let .unreadable(path, operation, code):
            return "\(path): cannot \(operation): \(Self.errnoText(code)) (errno \(code))"
        case let .notZipOrXML(path, found):
            return "\(path): not a zip or XML file (\(found))"
        case let .noHealthExportInZip(path, count):
            return "\(path): zip has no Apple Health export (looked at \(count) .xml \(count == 1 ? "entry" : "entries"))"
        case let .truncatedZip(path, offset, detail):
            return "\(path): truncated zip at byte offset \(offset): \(detail); the file is incomplete: copy it again, or export it again from the Health app"
        case let .damagedZip(path, offset, detail):
            return "\(path): damaged zip at byte offset \(offset): \(detail)" + Self.exportAgain
        case let .badCRC(path, entry, offset, expected, actual):
            return "\(path): CRC-32 mismatch in zip entry '\(entry)' (local header at byte offset \(offset)): "
                + "expected \(Self.hex32(expected)), computed \(Self.hex32(actual))" + Self.exportAgain
        case let .truncatedXML(path, inside, line, end):
            return "\(path): file ends at \(end) inside a \(inside) that starts at line \(line)"
        case let .malformedXML(path, at, problem):
            return "\(path): \(at): \(problem)"
        case let .notHealthExport(path, found, line):
            return "\(path): not an Apple Health export: \(found) at line \(line)"
        }
    }

    /// A problem with the XML's content (what a damaged zip entry inflates to
    /// as well), not with the container.
    var isAboutTheXML: Bool {
        switch self {
        case .truncatedXML, .malformedXML, .notHealthExport, .noHealthExportInZip: return true
        default: return false
        }
    }

    /// What a person does about a damaged zip.
    static let exportAgain = "; the file is damaged: export it again from the Health app"

    private static func hex32(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
    }

    private static func errnoText(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "unknown error" }
        return String(cString: text)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
