import Foundation
import StepLog

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
///   the tag. So `Workout` and its routes, `ActivitySummary`, `ClinicalRecord`,
///   other records' `MetadataEntry` children, and the `Record`s inside a
///   `Correlation` (which also appear at top level) cost one pass to their
///   closing `>`. A step record's own `MetadataEntry` children are read: they
///   are part of its identity.
/// - Attribute values are kept as raw bytes; the record builder decodes them.
/// - Bytes between tags, comments, CDATA and processing instructions are skipped.
/// - Structure is checked, not trusted: every end tag must close the innermost
///   open element, no tag may hold a `<` (a value whose quote is never closed
///   runs into the next tag), and after the root only whitespace, comments and
///   processing instructions may follow. Any breach is an `ExportError` naming
///   the line and byte offset of its cause: the unclosed element's start tag,
///   the attribute whose quote is missing, the stray end tag, the end of a cut file.
///
/// Streaming: `scan` is handed a contiguous buffer and returns how much of it
/// it has finished with; the caller keeps the rest (an element cut by the end
/// of the buffer) and hands it again, followed by more bytes. So memory is
/// the caller's window plus the largest single element.
final class HealthXMLScanner {
    enum Phase {
        /// Before the root element.
        case prolog
        /// Inside the root element.
        case body
        /// After the root's end tag: only whitespace, comments and processing
        /// instructions may follow.
        case epilog
    }

    private(set) var phase = Phase.prolog
    let path: String
    let builder: ExportStepRecordBuilder
    private(set) var malformedStepRecords = 0
    private(set) var malformedExamples: [ExportSkippedRecord] = []
    private(set) var outOfContractStepRecords = 0
    private(set) var outOfContractExamples: [ExportSkippedRecord] = []
    private(set) var nestedStepRecordsSkipped = 0
    /// Of the malformed step records: those with a missing or unreadable
    /// date, name or tag syntax.
    private(set) var unreadableFieldStepRecords = 0
    /// Step records read past words that are not `name="value"` (iOS 8 metadata keys with spaces).
    private(set) var lenientStepRecords = 0
    private(set) var exportDateMilliseconds: Int64?
    /// The `<ExportDate>`'s value when it is not a date this reader knows.
    private(set) var unreadableExportDate: String?

    /// Whether the last `<Record>` tag held words that are not `name="value"`
    /// (an iOS 8 export writes metadata as attributes, keys with spaces and
    /// all: `Health Mate App Version="2.6.2"`) and was read past them.
    private var recordReadLeniently = false
    /// Why the last `<Record>` tag's attributes could not be read one by one, if they could not.
    private var recordSyntaxError: String?

    /// The elements whose start tag has been read and whose end tag has not.
    private var open = ExportElementStack()
    private var rootClosedLine = 0
    /// Bytes consumed by earlier calls: the XML offset of the buffer `scan`
    /// is handed (the caller offers again, first, whatever was not consumed).
    private var consumedBefore: Int64 = 0
    private var attributes = ExportRecordAttributes()

    /// `nowMilliseconds`: the importer's clock, for the sample contract;
    /// `expectedRecords`: room the builder reserves for step records.
    init(path: String, nowMilliseconds: Int64 = Milliseconds.from(Date()), expectedRecords: Int = 1 << 16) {
        self.path = path
        builder = ExportStepRecordBuilder(nowMilliseconds: nowMilliseconds, expectedRecords: expectedRecords)
    }

    var stepRecordsKept: Int { builder.records.count }

    /// Scans `base[0..<count]` and returns how many leading bytes are done
    /// with; the rest must be offered again, with more bytes after it. With
    /// `atEnd` the buffer is the end of the input: everything is consumed or
    /// an error explains why it cannot be (a truncated file, not an export).
    func scan(_ base: UnsafePointer<UInt8>, count: Int, atEnd: Bool, lines: inout ExportLineCounter) throws -> Int {
        lines.offsetAtBase = consumedBefore
        let consumed = try scanBuffer(base, count: count, atEnd: atEnd, lines: &lines)
        consumedBefore += Int64(consumed)
        return consumed
    }

    private func scanBuffer(_ base: UnsafePointer<UInt8>, count: Int, atEnd: Bool, lines: inout ExportLineCounter) throws -> Int {
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
                throw ExportError.truncatedXML(path: path, inside: what, line: lines.line(at: offset), end: lines.position(at: count))
            case .noElement:
                throw ExportError.notHealthExport(path: path, found: "no <HealthData> element before the end of the file",
                                                  line: lines.line(at: count))
            }
        }
        let consumed = try scanBody(base, from: start, count: count, atEnd: atEnd, lines: &lines)
        if atEnd, phase == .body, let innermost = open.innermost {
            throw ExportError.truncatedXML(path: path, inside: "<\(open.name(of: innermost))> element",
                                           line: innermost.position.line, end: lines.position(at: count))
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
        // An item (comment, …) the buffer ends inside: hand it back, or at
        // the end of the input report it.
        func incomplete(_ start: Int, _ what: String, lines: inout ExportLineCounter) throws -> Int {
            guard atEnd else { return start }
            throw ExportError.truncatedXML(path: path, inside: what, line: lines.line(at: start), end: lines.position(at: count))
        }
        // A start tag the buffer ends inside. A tag never holds a '<', so one
        // in the part already here means a quote that is never closed: report
        // it now rather than carry ever more of the file.
        func incompleteTag(_ lt: Int, _ nameCount: Int?, lines: inout ExportLineCounter) throws -> Int {
            if ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: lt + 1, to: count) != nil {
                throw unterminatedValue(base, lt, nameCount ?? 0, limit: count, lines: &lines)
            }
            return try incomplete(lt, nameCount.map { "<\(Self.text(base, lt + 1, $0))> start tag" } ?? "tag", lines: &lines)
        }
        if phase == .epilog { return try scanEpilog(base, from: i, count: count, atEnd: atEnd, lines: &lines) }
        // The next '<', when the last start tag's check already found it.
        var next: Int?
        while true {
            let found = next ?? ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: i, to: count)
            next = nil
            guard let lt = found else { return count }
            guard lt + 1 < count else { return try incomplete(lt, "tag", lines: &lines) }
            switch base[lt + 1] {
            case UInt8(ascii: "/"):
                guard let end = try endTag(base, lt, count: count, lines: &lines) else {
                    return try incomplete(lt, "end tag", lines: &lines)
                }
                if phase == .epilog { return try scanEpilog(base, from: end, count: count, atEnd: atEnd, lines: &lines) }
                i = end
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

            // A start tag: its name runs to whitespace, '>' or '/' — or to a
            // '<', which no tag holds (stopping there, as end tags do, makes
            // the error the same wherever a buffer happens to end).
            var j = lt + 1
            while j < count {
                let c = base[j]
                if ExportByteSearch.isSpace(c) || c == UInt8(ascii: ">") || c == UInt8(ascii: "/") || c == UInt8(ascii: "<") { break }
                j += 1
            }
            guard j < count else { return try incompleteTag(lt, nil, lines: &lines) }
            let nameCount = j - lt - 1
            let depth = open.depth
            let isRecord = ExportByteSearch.equals(base, lt + 1, nameCount, "Record")
            let tag: TagEnd
            var isStep = false
            var isExportDate = false
            var wanted: (UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?) = (nil, nil)
            let isMetadata = depth == 2 && builder.isOpen && ExportByteSearch.equals(base, lt + 1, nameCount, "MetadataEntry")
            if isRecord, depth == 1 {
                guard let (end, step) = scanRecord(base, from: j, count: count) else {
                    return try incompleteTag(lt, nameCount, lines: &lines)
                }
                tag = end
                isStep = step
            } else if isRecord || isMetadata || (depth == 1 && ExportByteSearch.equals(base, lt + 1, nameCount, "ExportDate")) {
                isExportDate = !isRecord && !isMetadata
                let names: (StaticString, StaticString) = isRecord ? ("type", "type") : isMetadata ? ("key", "value") : ("value", "value")
                guard let (end, first, second) = attributeValues(names, base, from: j, count: count) else {
                    return try incompleteTag(lt, nameCount, lines: &lines)
                }
                tag = end
                wanted = (first, second)
            } else {
                guard let end = skipTag(base, from: j, count: count) else {
                    return try incompleteTag(lt, nameCount, lines: &lines)
                }
                tag = end
            }
            // A tag never holds a '<' (values write it as &lt;): one here
            // means a value's closing quote is missing. One search from just
            // after this '<' finds both that and the next tag's '<'.
            next = ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: lt + 1, to: count)
            if let after = next, after < tag.end {
                throw unterminatedValue(base, lt, nameCount, limit: tag.end, lines: &lines)
            }
            if nameCount == 0 {
                throw ExportError.malformedXML(path: path, at: lines.position(at: lt), problem: .lessThanInTag(element: ""))
            }

            if isStep {
                let outcome = builder.begin(attributes, syntaxError: recordSyntaxError, complete: tag.selfClosing)
                switch outcome {
                case .kept:
                    break
                case let .malformed(reason, kind):
                    malformedStepRecords += 1
                    if kind == .field { unreadableFieldStepRecords += 1 }
                    if malformedExamples.count < ExportReadSummary.maxSkippedExamples {
                        malformedExamples.append(ExportSkippedRecord(line: lines.line(at: lt), reason: reason))
                    }
                case .outOfContract(let violation):
                    outOfContractStepRecords += 1
                    if outOfContractExamples.count < ExportReadSummary.maxSkippedExamples {
                        outOfContractExamples.append(ExportSkippedRecord(line: lines.line(at: lt), reason: violation.reason,
                                                                         field: violation.field))
                    }
                }
                if recordReadLeniently {
                    if case .malformed(_, .field) = outcome {} else { lenientStepRecords += 1 }
                }
            } else if isMetadata {
                builder.addMetadata(key: wanted.0, value: wanted.1)
            } else if isRecord {
                // Inside a Correlation (or anything else): also printed at top level.
                if let value = wanted.0, Self.isStepCount(value) { nestedStepRecordsSkipped += 1 }
            } else if isExportDate {
                readExportDate(wanted.0)
            }

            if !tag.selfClosing {
                open.push(name: base + lt + 1, count: nameCount, at: lines.position(at: lt))
            } else if depth == 0 {
                // <HealthData/>: an export with nothing in it.
                rootClosedLine = lines.line(at: lt)
                phase = .epilog
                return try scanEpilog(base, from: tag.end, count: count, atEnd: atEnd, lines: &lines)
            }
            i = tag.end
        }
    }

    /// Reads the end tag at `lt` and closes the innermost open element, which
    /// must have its name. Returns the offset past its `>`, or nil when the
    /// buffer ends inside it.
    private func endTag(_ base: UnsafePointer<UInt8>, _ lt: Int, count: Int, lines: inout ExportLineCounter) throws -> Int? {
        var j = lt + 2
        while j < count, !ExportByteSearch.isSpace(base[j]), base[j] != UInt8(ascii: ">"), base[j] != UInt8(ascii: "<") { j += 1 }
        let nameCount = j - lt - 2
        while j < count, ExportByteSearch.isSpace(base[j]) { j += 1 }
        guard j < count else { return nil }
        guard base[j] == UInt8(ascii: ">") else {
            throw ExportError.malformedXML(path: path, at: lines.position(at: lt),
                                           problem: .malformedEndTag(name: Self.text(base, lt + 2, nameCount)))
        }
        switch open.close(name: base + lt + 2, count: nameCount) {
        case .closed(let depth):
            if depth == 1 { builder.finish() }       // a step record's end: its metadata is complete
            if depth == 0 {
                rootClosedLine = lines.line(at: lt)
                phase = .epilog
            }
            return j + 1
        case let .mismatch(innermost, outerHasName):
            // Not the innermost element's name. If an outer element has it,
            // the ones inside that were never closed: report the innermost,
            // at its own start tag. Otherwise nothing open has this name.
            let name = Self.text(base, lt + 2, nameCount)
            if outerHasName {
                throw ExportError.malformedXML(path: path, at: innermost.position,
                                               problem: .unclosedElement(name: open.name(of: innermost), closedBy: name,
                                                                         closedAtLine: lines.line(at: lt)))
            }
            throw ExportError.malformedXML(path: path, at: lines.position(at: lt),
                                           problem: .strayEndTag(name: name, openElement: open.name(of: innermost),
                                                                 openLine: innermost.position.line))
        case .empty:
            return j + 1        // not reached: after the root, the epilog handles end tags
        }
    }

    /// After the root element: whitespace, comments and processing instructions.
    private func scanEpilog(_ base: UnsafePointer<UInt8>, from: Int, count: Int, atEnd: Bool,
                            lines: inout ExportLineCounter) throws -> Int {
        var i = from
        while i < count {
            if ExportByteSearch.isSpace(base[i]) {
                i += 1
                continue
            }
            func after(_ what: String) -> ExportError {
                .malformedXML(path: path, at: lines.position(at: i), problem: .contentAfterRoot(what: what, rootClosedAtLine: rootClosedLine))
            }
            guard base[i] == UInt8(ascii: "<") else { throw after("text") }
            let (close, what): (StaticString, String)
            if ExportByteSearch.hasPrefix(base, i, count, "<!--") {
                (close, what) = ("-->", "comment")
            } else if ExportByteSearch.hasPrefix(base, i, count, "<?") {
                (close, what) = ("?>", "processing instruction")
            } else if count - i < 4, !atEnd {
                return i
            } else {
                var j = i + 1
                if j < count, base[j] == UInt8(ascii: "/") { j += 1 }
                let nameStart = j
                while j < count, !ExportByteSearch.isSpace(base[j]), base[j] != UInt8(ascii: ">"), base[j] != UInt8(ascii: "/"),
                      base[j] != UInt8(ascii: "<") { j += 1 }
                // A name cut by the buffer's end: name it whole, from the next buffer.
                if j == count, !atEnd { return i }
                let name = Self.text(base, nameStart, j - nameStart)
                throw after(nameStart == i + 2 ? "end tag </\(name)>" : "<\(name)>")
            }
            guard let end = ExportByteSearch.find(close, in: base, from: i + 2, to: count) else {
                guard atEnd else { return i }
                throw ExportError.truncatedXML(path: path, inside: what, line: lines.line(at: i), end: lines.position(at: count))
            }
            i = end + close.utf8CodeUnitCount
        }
        return count
    }

    /// The `<ExportDate>`'s `value`: kept as an instant, or as the text that is not one.
    private func readExportDate(_ value: UnsafeBufferPointer<UInt8>?) {
        if let value, let base = value.baseAddress, let instant = ExportDateParser.milliseconds(base, count: value.count) {
            exportDateMilliseconds = instant
            unreadableExportDate = nil
        } else {
            exportDateMilliseconds = nil
            unreadableExportDate = value.map(ExportStepValue.quoted) ?? "(no value attribute)"
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
    ///
    /// A word not followed by `=` (part of an iOS 8 metadata key with spaces,
    /// `Health Mate App Version="2.6.2"`) is stepped over and the tag marked
    /// `recordReadLeniently`. Right after such a word, a step attribute the
    /// tag already has is the tail of a key (`Daily Steps value="13"`; Apple
    /// writes a record's own attributes before its metadata): the first stands.
    private func scanRecord(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> (TagEnd, isStep: Bool)? {
        attributes = ExportRecordAttributes()
        recordSyntaxError = nil
        recordReadLeniently = false
        var isStep = false
        var afterBareWord = false
        var i = from
        while true {
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            let c = base[i]
            if c == UInt8(ascii: ">") { return (TagEnd(end: i + 1, selfClosing: false), isStep) }
            if c == UInt8(ascii: "/") {
                guard i + 1 < count else { return nil }
                if base[i + 1] == UInt8(ascii: ">") { return (TagEnd(end: i + 2, selfClosing: true), isStep) }
                // A '/' inside a word (`Withings Link/ID="…"`): part of the word.
                recordReadLeniently = true
                afterBareWord = true
                i += 1
                continue
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
                // A word without quotes in or after it; one with a quote is a
                // value's broken quoting, which the tag's end will show.
                if nameCount > 0, base[i] != UInt8(ascii: "\""), base[i] != UInt8(ascii: "'"),
                   ExportByteSearch.find(UInt8(ascii: "\""), in: base, from: nameStart, to: nameStart + nameCount) == nil,
                   ExportByteSearch.find(UInt8(ascii: "'"), in: base, from: nameStart, to: nameStart + nameCount) == nil {
                    recordReadLeniently = true
                    afterBareWord = true
                    continue
                }
                return syntaxError("attribute syntax error (expected name=\"value\")", base, at: nameStart, count: count, isStep: isStep)
            }
            if afterBareWord {
                afterBareWord = false
                // A step attribute the tag already has is the tail of a
                // metadata key (`Daily Steps value="13"`): its value is not taken.
                if attributes.alreadyHas(name: base, nameStart, nameCount), let close = Self.quotedValueEnd(base, from: i + 1, count: count) {
                    i = close + 1
                    continue
                }
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

    /// The offset of the closing quote of the quoted value after `from`
    /// (whitespace, then a quote); nil when there is none or the buffer ends first.
    private static func quotedValueEnd(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> Int? {
        var i = from
        while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
        guard i < count, base[i] == UInt8(ascii: "\"") || base[i] == UInt8(ascii: "'") else { return nil }
        return ExportByteSearch.find(base[i], in: base, from: i + 1, to: count)
    }

    /// A step record whose tag cannot be read attribute by attribute: note
    /// why, then find the tag's end the tolerant way.
    private func syntaxError(_ problem: String, _ base: UnsafePointer<UInt8>, at i: Int, count: Int,
                             isStep: Bool) -> (TagEnd, isStep: Bool)? {
        recordSyntaxError = problem
        guard let end = skipTag(base, from: i, count: count) else { return nil }
        return (end, isStep)
    }

    /// The values of attributes `wanted.0` and `wanted.1` (nil when absent)
    /// and the tag's end, for the rare tags read other than by `scanRecord`
    /// (nested Records, ExportDate, a step record's MetadataEntry children).
    /// Nil when the buffer ends inside the tag.
    private func attributeValues(_ wanted: (StaticString, StaticString), _ base: UnsafePointer<UInt8>, from: Int,
                                 count: Int) -> (TagEnd, UnsafeBufferPointer<UInt8>?, UnsafeBufferPointer<UInt8>?)? {
        var first: UnsafeBufferPointer<UInt8>?, second: UnsafeBufferPointer<UInt8>?
        var i = from
        while true {
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            if base[i] == UInt8(ascii: ">") { return (TagEnd(end: i + 1, selfClosing: false), first, second) }
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
                return (end, first, second)
            }
            i += 1
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return nil }
            let quote = base[i]
            guard quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
                guard let end = skipTag(base, from: i, count: count) else { return nil }
                return (end, first, second)
            }
            guard let close = ExportByteSearch.find(quote, in: base, from: i + 1, to: count) else { return nil }
            let value = UnsafeBufferPointer(start: base + i + 1, count: close - i - 1)
            if ExportByteSearch.equals(base, nameStart, nameCount, wanted.0) {
                first = value
            } else if ExportByteSearch.equals(base, nameStart, nameCount, wanted.1) {
                second = value
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

    /// A `<` inside the tag at `lt` (before `limit`): name the attribute
    /// whose closing quote is missing. That is the first attribute whose value
    /// holds the `<` (it ran into the next tag) — unless an earlier value ends
    /// in ` name=`, the sign that it swallowed the next attribute's opening
    /// quote (the quotes then pair up one off, and the missing quote is
    /// that earlier one's).
    private func unterminatedValue(_ base: UnsafePointer<UInt8>, _ lt: Int, _ nameCount: Int, limit: Int,
                                   lines: inout ExportLineCounter) -> ExportError {
        let element = Self.text(base, lt + 1, nameCount)
        var suspect: (name: String, at: Int)?
        var culprit: (name: String, at: Int)?
        var i = lt + 1 + nameCount
        attributes: while i < limit {
            while i < limit, ExportByteSearch.isSpace(base[i]) { i += 1 }
            let nameStart = i
            while i < limit {
                let c = base[i]
                if c == UInt8(ascii: "=") || ExportByteSearch.isSpace(c) || c == UInt8(ascii: ">") || c == UInt8(ascii: "/")
                    || c == UInt8(ascii: "<") || c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") { break }
                i += 1
            }
            let name = (nameStart, i - nameStart)
            while i < limit, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard name.1 > 0, i < limit, base[i] == UInt8(ascii: "=") else { break attributes }
            i += 1
            while i < limit, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < limit, base[i] == UInt8(ascii: "\"") || base[i] == UInt8(ascii: "'") else { break attributes }
            let close = ExportByteSearch.find(base[i], in: base, from: i + 1, to: limit) ?? limit
            if ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: i + 1, to: close) != nil {
                culprit = suspect ?? (Self.text(base, name.0, name.1), name.0)
                break attributes
            }
            if suspect == nil, Self.endsWithAttributeName(base, from: i + 1, to: close) {
                suspect = (Self.text(base, name.0, name.1), name.0)
            }
            i = close + 1
        }
        if let found = culprit ?? suspect {
            return .malformedXML(path: path, at: lines.position(at: found.at),
                                 problem: .unterminatedAttributeValue(attribute: found.name, element: element))
        }
        let lessThan = ExportByteSearch.find(UInt8(ascii: "<"), in: base, from: lt + 1, to: limit) ?? lt
        return .malformedXML(path: path, at: lines.position(at: lessThan), problem: .lessThanInTag(element: element))
    }

    /// Whether `base[from..<to]` ends in whitespace, a name and `=` (then
    /// optional whitespace): what a value that swallowed the next attribute
    /// looks like.
    private static func endsWithAttributeName(_ base: UnsafePointer<UInt8>, from: Int, to: Int) -> Bool {
        var j = to - 1
        while j >= from, ExportByteSearch.isSpace(base[j]) { j -= 1 }
        guard j >= from, base[j] == UInt8(ascii: "=") else { return false }
        j -= 1
        let nameEnd = j
        while j >= from, !ExportByteSearch.isSpace(base[j]), base[j] != UInt8(ascii: "=") { j -= 1 }
        return j < nameEnd && j >= from && ExportByteSearch.isSpace(base[j])
    }

    private static func text(_ base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int) -> String {
        String(decoding: UnsafeBufferPointer(start: base + offset, count: max(0, count)), as: UTF8.self)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
