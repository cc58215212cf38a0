/// A streaming scanner for an Apple Health `export.xml`, hand-written over
/// bytes. It keeps what a step import needs — top-level StepCount `<Record>`s
/// and the `<ExportDate>` — and steps over everything else as fast as it can
/// find the next `<`.
///
/// Not a general XML parser, on purpose: Foundation's `XMLParser` (libxml2)
/// rejects the iOS 16 export's malformed DTD and stray control characters,
/// and a full parser would spend its time building what is thrown away.
///
/// - The prolog (declaration, comments, DOCTYPE and inline DTD) is stepped
///   over by `HealthXMLProlog`; the first element must be `<HealthData>`.
/// - Every other element is skipped with its children. Only `Record`s that
///   are direct children of `HealthData` are read, and for those the `type`
///   attribute is compared first, as bytes: any other type skips the rest of
///   the tag. So `MetadataEntry`, `Workout` and its routes, `ActivitySummary`,
///   `ClinicalRecord`, and the `Record`s inside a `Correlation` (which also
///   appear at top level) cost one pass to their closing `>`.
/// - Attribute values are kept as raw bytes; the record builder decodes them.
/// - Bytes between tags, comments, CDATA and processing instructions are skipped.
///
/// Streaming: `scan` is handed a contiguous buffer and returns how much of it
/// it has finished with; the caller keeps the rest (an element cut by the end
/// of the buffer) and hands it again, followed by more bytes. So memory is
/// the caller's window plus the largest single element.
final class HealthXMLScanner {
    enum Phase {
        case prolog, body, finished
    }

    private(set) var phase = Phase.prolog
    let path: String
    let builder = ExportStepRecordBuilder()
    private(set) var malformedStepRecords = 0
    private(set) var malformedExamples: [ExportSkippedRecord] = []
    private(set) var nestedStepRecordsSkipped = 0
    private(set) var exportDateMilliseconds: Int64?

    /// Open elements, innermost last: an index into `elementNames` and the
    /// line of the start tag (for "file ends inside a <Record> element at line N").
    private var openElements: [(name: UInt16, line: Int)] = []
    private var elementNames: [[UInt8]] = []
    private var attributes = ExportRecordAttributes()

    init(path: String) {
        self.path = path
        openElements.reserveCapacity(64)
    }

    var stepRecordsKept: Int { builder.records.count }

    /// Scans `base[0..<count]` and returns how many leading bytes are done
    /// with; the rest must be offered again, with more bytes after it. With
    /// `atEnd` the buffer is the end of the input: everything is consumed or
    /// an error explains why it cannot be (a truncated file, not an export).
    func scan(_ base: UnsafePointer<UInt8>, count: Int, atEnd: Bool, lines: inout ExportLineCounter) throws -> Int {
        var start = 0
        if phase == .prolog {
            switch HealthXMLProlog.findRoot(base, count: count, atEnd: atEnd) {
            case .needMore:
                return 0
            case let .root(offset, name):
                guard name == "HealthData" else {
                    throw ExportError.notHealthExport(path: path, found: "the root element is <\(name)>, not <HealthData>",
                                                      line: lines.line(at: offset))
                }
                phase = .body
                start = offset
            case let .unexpected(offset, what):
                throw ExportError.notHealthExport(path: path, found: what, line: lines.line(at: offset))
            case let .unterminated(offset, what):
                throw ExportError.truncatedXML(path: path, inside: what, line: lines.line(at: offset))
            case .noElement:
                throw ExportError.notHealthExport(path: path, found: "no <HealthData> element before the end of the file",
                                                  line: lines.line(at: count))
            }
        }
        guard phase == .body else { return count }
        let consumed = try scanBody(base, from: start, count: count, atEnd: atEnd, lines: &lines)
        if atEnd, phase == .body, let innermost = openElements.last {
            let name = String(decoding: elementNames[Int(innermost.name)], as: UTF8.self)
            throw ExportError.truncatedXML(path: path, inside: "<\(name)> element", line: innermost.line)
        }
        return consumed
    }

    /// Where a tag ends: the offset just past its `>`, and whether it was `/>`.
    private struct TagEnd {
        var end: Int
        var selfClosing: Bool
    }

    private func scanBody(_ base: UnsafePointer<UInt8>, from: Int, count: Int, atEnd: Bool,
                          lines: inout ExportLineCounter) throws -> Int {
        var i = from
        // An item (tag, comment, …) the buffer ends inside: hand it back, or
        // at the end of the input report it.
        func incomplete(_ start: Int, _ what: String, lines: inout ExportLineCounter) throws -> Int {
            guard atEnd else { return start }
            throw ExportError.truncatedXML(path: path, inside: what, line: lines.line(at: start))
        }
        while true {
            guard let lt = ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: i, to: count) else { return count }
            guard lt + 1 < count else { return try incomplete(lt, "tag", lines: &lines) }
            switch base[lt + 1] {
            case UInt8(ascii: "/"):
                guard let gt = ExportByteSearch.find(UInt8(ascii: ">"), in: base, from: lt + 2, to: count) else {
                    return try incomplete(lt, "end tag", lines: &lines)
                }
                // Well-formed exports close what they open; a stray end tag
                // at the top is ignored rather than trusted.
                if !openElements.isEmpty { openElements.removeLast() }
                if openElements.isEmpty {
                    phase = .finished
                    return count
                }
                i = gt + 1
                continue
            case UInt8(ascii: "!"):
                if ExportByteSearch.hasPrefix(base, lt, count, "<!--") {
                    guard let close = ExportByteSearch.find("-->", in: base, from: lt + 4, to: count) else {
                        return try incomplete(lt, "comment", lines: &lines)
                    }
                    i = close + 3
                } else if ExportByteSearch.hasPrefix(base, lt, count, "<![CDATA[") {
                    guard let close = ExportByteSearch.find("]]>", in: base, from: lt + 9, to: count) else {
                        return try incomplete(lt, "CDATA section", lines: &lines)
                    }
                    i = close + 3
                } else if count - lt < 9, !atEnd {
                    return lt
                } else {
                    guard let end = skipTag(base, from: lt + 2, count: count) else {
                        return try incomplete(lt, "markup declaration", lines: &lines)
                    }
                    i = end.end
                }
                continue
            case UInt8(ascii: "?"):
                guard let close = ExportByteSearch.find("?>", in: base, from: lt + 2, to: count) else {
                    return try incomplete(lt, "processing instruction", lines: &lines)
                }
                i = close + 2
                continue
            default:
                break
            }

            // A start tag: its name runs to whitespace, '>' or '/'.
            var j = lt + 1
            while j < count {
                let c = base[j]
                if ExportByteSearch.isSpace(c) || c == UInt8(ascii: ">") || c == UInt8(ascii: "/") { break }
                j += 1
            }
            guard j < count else { return try incomplete(lt, "tag", lines: &lines) }
            let nameCount = j - lt - 1
            let depth = openElements.count
            let isRecord = ExportByteSearch.equals(base, lt + 1, nameCount, "Record")
            let tag: TagEnd
            if isRecord, depth == 1 {
                guard let (end, isStep) = scanRecord(base, from: j, count: count) else {
                    return try incomplete(lt, "<Record> element", lines: &lines)
                }
                tag = end
                if isStep {
                    if case .malformed(let reason) = builder.add(attributes) {
                        malformedStepRecords += 1
                        if malformedExamples.count < ExportReadSummary.maxSkippedExamples {
                            malformedExamples.append(ExportSkippedRecord(line: lines.line(at: lt), reason: reason))
                        }
                    }
                }
            } else if isRecord || (depth == 1 && ExportByteSearch.equals(base, lt + 1, nameCount, "ExportDate")) {
                let wanted: StaticString = isRecord ? "type" : "value"
                guard let (end, value) = attributeValue(wanted, base, from: j, count: count) else {
                    return try incomplete(lt, isRecord ? "<Record> element" : "<ExportDate> element", lines: &lines)
                }
                tag = end
                if isRecord {
                    // Inside a Correlation (or anything else): also printed at top level.
                    if let value, Self.isStepCount(value) { nestedStepRecordsSkipped += 1 }
                } else if let value, let base = value.baseAddress {
                    exportDateMilliseconds = ExportDateParser.milliseconds(base, count: value.count)
                }
            } else {
                guard let end = skipTag(base, from: j, count: count) else {
                    let name = String(decoding: UnsafeBufferPointer(start: base + lt + 1, count: nameCount), as: UTF8.self)
                    return try incomplete(lt, "<\(name)> element", lines: &lines)
                }
                tag = end
            }
            if !tag.selfClosing {
                openElements.append((nameIndex(base, lt + 1, nameCount), lines.line(at: lt)))
            } else if depth == 0 {
                // <HealthData/>: an export with nothing in it.
                phase = .finished
                return count
            }
            i = tag.end
        }
    }

    @inline(__always)
    static func isStepCount(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = value.baseAddress else { return false }
        return ExportByteSearch.equals(base, 0, value.count, ExportStepRecordBuilder.stepCountType)
    }

    /// Reads the attributes of a top-level `<Record` (from just after its
    /// name) into `attributes`. As soon as `type` is known not to be
    /// StepCount the rest of the tag is skipped unparsed. Nil when the buffer
    /// ends inside the tag.
    private func scanRecord(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> (TagEnd, isStep: Bool)? {
        attributes = ExportRecordAttributes()
        var isStep = false
        var i = from
        while true {
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            let c = base[i]
            if c == UInt8(ascii: ">") { return (TagEnd(end: i + 1, selfClosing: false), isStep) }
            if c == UInt8(ascii: "/") {
                guard i + 1 < count else { return nil }
                if base[i + 1] == UInt8(ascii: ">") { return (TagEnd(end: i + 2, selfClosing: true), isStep) }
            }
            let nameStart = i
            while i < count {
                let b = base[i]
                if b == UInt8(ascii: "=") || ExportByteSearch.isSpace(b) || b == UInt8(ascii: ">") || b == UInt8(ascii: "/") { break }
                i += 1
            }
            let nameCount = i - nameStart
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            guard base[i] == UInt8(ascii: "="), nameCount > 0 else {
                return syntaxError("attribute syntax error (expected name=\"value\")", base, at: i, count: count, isStep: isStep)
            }
            i += 1
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            let quote = base[i]
            guard quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                let name = String(decoding: UnsafeBufferPointer(start: base + nameStart, count: nameCount), as: UTF8.self)
                return syntaxError("attribute \(name) has an unquoted value", base, at: i, count: count, isStep: isStep)
            }
            guard let close = ExportByteSearch.find(quote, in: base, from: i + 1, to: count) else { return nil }
            let value = UnsafeBufferPointer(start: base + i + 1, count: close - i - 1)
            if attributes.set(name: base, nameStart, nameCount, value: value) {
                guard Self.isStepCount(value) else {
                    guard let end = skipTag(base, from: close + 1, count: count) else { return nil }
                    return (end, false)
                }
                isStep = true
            }
            i = close + 1
        }
    }

    /// A step record whose tag cannot be read attribute by attribute: note
    /// why, then find the tag's end the tolerant way.
    private func syntaxError(_ problem: String, _ base: UnsafePointer<UInt8>, at i: Int, count: Int,
                             isStep: Bool) -> (TagEnd, isStep: Bool)? {
        attributes.syntaxError = problem
        guard let end = skipTag(base, from: i, count: count) else { return nil }
        return (end, isStep)
    }

    /// The value of attribute `wanted` (nil when absent) and the tag's end,
    /// for the rare tags read other than by `scanRecord`. Nil when the buffer
    /// ends inside the tag.
    private func attributeValue(_ wanted: StaticString, _ base: UnsafePointer<UInt8>, from: Int,
                                count: Int) -> (TagEnd, UnsafeBufferPointer<UInt8>?)? {
        var found: UnsafeBufferPointer<UInt8>?
        var i = from
        while true {
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            if base[i] == UInt8(ascii: ">") { return (TagEnd(end: i + 1, selfClosing: false), found) }
            let nameStart = i
            while i < count, base[i] != UInt8(ascii: "="), base[i] != UInt8(ascii: ">"), !ExportByteSearch.isSpace(base[i]) {
                i += 1
            }
            let nameCount = i - nameStart
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            if base[i] != UInt8(ascii: "=") {
                // "/>", or broken syntax: finish the tag the tolerant way.
                guard let end = skipTag(base, from: nameStart, count: count) else { return nil }
                return (end, found)
            }
            i += 1
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            let quote = base[i]
            guard quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                guard let end = skipTag(base, from: i, count: count) else { return nil }
                return (end, found)
            }
            guard let close = ExportByteSearch.find(quote, in: base, from: i + 1, to: count) else { return nil }
            if ExportByteSearch.equals(base, nameStart, nameCount, wanted) {
                found = UnsafeBufferPointer(start: base + i + 1, count: close - i - 1)
            }
            i = close + 1
        }
    }

    /// Finds the end of a tag from `from` (anywhere after its name), stepping
    /// over quoted values (which may hold `>`). Nil when the buffer ends first.
    @inline(__always)
    private func skipTag(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> TagEnd? {
        var i = from
        var previous: UInt8 = 0
        while i < count {
            let c = base[i]
            if c == UInt8(ascii: ">") { return TagEnd(end: i + 1, selfClosing: previous == UInt8(ascii: "/")) }
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") {
                guard let close = ExportByteSearch.find(c, in: base, from: i + 1, to: count) else { return nil }
                i = close + 1
                previous = c
                continue
            }
            previous = c
            i += 1
        }
        return nil
    }

    /// A small number for an element name, so the stack of open elements
    /// holds no strings (an export uses a few dozen distinct names).
    private func nameIndex(_ base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int) -> UInt16 {
        for (index, name) in elementNames.enumerated() where name.count == count {
            let same = name.withUnsafeBufferPointer { memcmp($0.baseAddress!, base + offset, count) == 0 }
            if same { return UInt16(index) }
        }
        // A real export has a few dozen names; past this many, names are
        // lumped together so a hostile file cannot grow the table (or the
        // search above) without bound.
        if elementNames.count == Self.maxElementNames {
            elementNames.append(Array("element".utf8))
        }
        if elementNames.count > Self.maxElementNames { return UInt16(Self.maxElementNames) }
        elementNames.append(Array(UnsafeBufferPointer(start: base + offset, count: count)))
        return UInt16(elementNames.count - 1)
    }

    private static let maxElementNames = 1024
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
