import Foundation
import StepLog
import Testing
@testable import StepSync

/// The scanner is strict about structure: an end tag that closes the wrong
/// element, an element never closed, a quote never closed, a cut file, or
/// content after the root is an error naming the line and byte offset of
/// the real problem — and nothing from the file is kept.
@Suite struct ExportStructureTests {
    static let records = (0..<6).map { ExportTestRecord.step(minute: $0 * 3, count: 10 + $0) }

    /// 1-based line and byte offset of the first occurrence of `marker`.
    static func position(of marker: String, in text: String) -> ExportXMLPosition {
        let prefix = text[..<text.range(of: marker)!.lowerBound]
        return ExportXMLPosition(line: prefix.filter { $0 == "\n" }.count + 1, offset: Int64(prefix.utf8.count))
    }

    /// Writes `body` as an export and returns (path, text, error thrown).
    func read(_ body: [String], in dir: TemporaryDirectory, name: String = "export.xml") throws -> (String, String, ExportError?) {
        let text = ExportTestDocument.xml(body)
        let path = try dir.write(name, text)
        return (path, text, exportError(path))
    }

    @Test func aStrayEndTagStopsTheImportAndIsNamed() throws {
        let dir = TemporaryDirectory("steplog-export")
        // Before, a stray </Record> ended the import there, quietly, with the records before it.
        let body = Self.records.prefix(3).map(\.xml) + ["</Record>"] + Self.records.suffix(3).map(\.xml)
        let (path, text, error) = try read(body, in: dir)
        let at = Self.position(of: "</Record>", in: text)
        let root = Self.position(of: "<HealthData", in: text).line
        #expect(error == .malformedXML(path: path, at: at, problem: .strayEndTag(name: "Record", openElement: "HealthData", openLine: root)))
        #expect(error?.description == "\(path): line \(at.line) (byte offset \(at.offset)): stray end tag </Record> (the open element is <HealthData> from line \(root))")

        // Inside another element, too: a </Workout> where a Correlation is open.
        let (path2, text2, error2) = try read(["<Correlation type=\"x\" sourceName=\"s\">", Self.records[0].xml, "</Workout>", "</Correlation>"], in: dir)
        #expect(error2 == .malformedXML(path: path2, at: Self.position(of: "</Workout>", in: text2),
                                        problem: .strayEndTag(name: "Workout", openElement: "Correlation",
                                                              openLine: Self.position(of: "<Correlation", in: text2).line)))
    }

    @Test func aMismatchedEndTagNamesTheElementLeftOpen() throws {
        let dir = TemporaryDirectory("steplog-export")
        // </Workout> while its WorkoutRoute is still open: the route was never closed.
        let body = ["<Workout workoutActivityType=\"HKWorkoutActivityTypeWalking\" sourceName=\"x\">",
                    "  <WorkoutRoute sourceName=\"x\">",
                    "    <Location date=\"2021-03-01 09:00:00 -0800\" latitude=\"37.7\"/>",
                    "</Workout>"] + Self.records.map(\.xml)
        let (path, text, error) = try read(body, in: dir)
        let route = Self.position(of: "<WorkoutRoute", in: text)
        #expect(error == .malformedXML(path: path, at: route,
                                       problem: .unclosedElement(name: "WorkoutRoute", closedBy: "Workout",
                                                                 closedAtLine: Self.position(of: "</Workout>", in: text).line)))
        #expect(error?.description.hasPrefix("\(path): line \(route.line) (byte offset \(route.offset)): <WorkoutRoute> is never closed") == true)
    }

    /// An unclosed <Workout> swallowed every later top-level record (they
    /// became its children) and was reported at the root's line, if at all.
    @Test func anUnclosedElementIsReportedAtItsOwnStartTag() throws {
        let dir = TemporaryDirectory("steplog-export")
        let body = Self.records.prefix(2).map(\.xml)
            + ["<Workout workoutActivityType=\"HKWorkoutActivityTypeRunning\" sourceName=\"x\">",
               "  <MetadataEntry key=\"HKIndoorWorkout\" value=\"0\"/>"]
            + Self.records.suffix(4).map(\.xml)
        let (path, text, error) = try read(body, in: dir)
        let workout = Self.position(of: "<Workout", in: text)
        let end = Self.position(of: "</HealthData>", in: text)
        #expect(error == .malformedXML(path: path, at: workout,
                                       problem: .unclosedElement(name: "Workout", closedBy: "HealthData", closedAtLine: end.line)))
        #expect(error?.description == "\(path): line \(workout.line) (byte offset \(workout.offset)): <Workout> is never closed (</HealthData> at line \(end.line) closes an element around it)")
    }

    @Test func aMissingQuoteNamesItsAttribute() throws {
        let dir = TemporaryDirectory("steplog-export")
        let good = Self.records[1].xml
        // The last attribute: its value runs to the next record's type=".
        let last = Self.records[0].xml.replacingOccurrences(of: "value=\"10\"/>", with: "value=\"10/>")
        var (path, text, error) = try read([last, good], in: dir)
        var at = Self.position(of: "value=\"10/>", in: text)
        #expect(error == .malformedXML(path: path, at: at, problem: .unterminatedAttributeValue(attribute: "value", element: "Record")))
        #expect(error?.description == "\(path): line \(at.line) (byte offset \(at.offset)): the quote opened by value= in <Record> is never closed (the value runs into the next tag)")

        // A middle one: the quotes after it pair up one off, and the value
        // that swallowed ` endDate=` gives it away.
        let middle = Self.records[0].xml.replacingOccurrences(of: "-0800\" endDate=", with: "-0800 endDate=")
        (path, text, error) = try read([middle, good], in: dir, name: "middle.xml")
        at = Self.position(of: "startDate=\"2021-03-01 09:00:00 -0800 endDate=", in: text)
        #expect(error == .malformedXML(path: path, at: at, problem: .unterminatedAttributeValue(attribute: "startDate", element: "Record")))

        // In a record that is not a step record, and in a MetadataEntry of a step record.
        let heart = "<Record type=\"HKQuantityTypeIdentifierHeartRate\" sourceName=\"x\" unit=\"count/min\" value=\"61/>"
        (path, text, error) = try read([heart, good], in: dir, name: "heart.xml")
        #expect(error == .malformedXML(path: path, at: Self.position(of: "value=\"61", in: text),
                                       problem: .unterminatedAttributeValue(attribute: "value", element: "Record")))
        var tagged = Self.records[2]
        tagged.metadata = [("HKExternalUUID", "X")]
        let brokenEntry = tagged.xml.replacingOccurrences(of: "key=\"HKExternalUUID\"", with: "key=\"HKExternalUUID")
        (path, text, error) = try read([brokenEntry, good], in: dir, name: "entry.xml")
        #expect(error == .malformedXML(path: path, at: Self.position(of: "key=\"HKExternalUUID", in: text),
                                       problem: .unterminatedAttributeValue(attribute: "key", element: "MetadataEntry")))
    }

    /// A file cut anywhere in its body: the error names the byte offset and
    /// line where the data ends, and the innermost open element.
    @Test func aCutFileNamesWhereItEnds() throws {
        let dir = TemporaryDirectory("steplog-export")
        var tagged = Self.records[3]
        tagged.metadata = [("HKExternalUUID", "X")]
        let text = ExportTestDocument.xml(Self.records.prefix(3).map(\.xml) + [tagged.xml] + Self.records.suffix(2).map(\.xml))
        let bytes = Array(text.utf8)
        let bodyStart = Self.position(of: "<HealthData", in: text).offset
        let rootLine = Self.position(of: "<HealthData", in: text).line
        let closing = Int(Self.position(of: "</HealthData>", in: text).offset)
        var random = SplitMix64(seed: 5)
        var cuts = Array(stride(from: Int(bodyStart) + 1, to: closing, by: 7))
        for _ in 0..<40 { cuts.append(Int(bodyStart) + 1 + Int(random.next() % UInt64(closing - Int(bodyStart)))) }
        for cut in cuts {
            let path = try dir.write("cut.xml", Array(bytes.prefix(cut)))
            let kept = String(decoding: bytes.prefix(cut), as: UTF8.self)
            let end = ExportXMLPosition(line: kept.filter { $0 == "\n" }.count + 1, offset: Int64(cut))
            guard case let .truncatedXML(errorPath, inside, line, errorEnd)? = exportError(path) else {
                Issue.record("cut at \(cut): \(String(describing: exportError(path)))")
                continue
            }
            #expect(errorPath == path && errorEnd == end, "cut at \(cut)")
            #expect(line >= rootLine && line <= end.line, "cut at \(cut): \(inside) at line \(line)")
        }
        // Two exact messages: inside a record's start tag, and between records.
        let inTag = text.range(of: "value=\"11\"/>")!.lowerBound
        let path = try dir.write("in-tag.xml", String(text[..<inTag]))
        let at = Self.position(of: "value=\"11\"/>", in: text)
        let recordLine = at.line
        #expect(exportError(path)?.description == "\(path): file ends at line \(at.line) (byte offset \(at.offset)) inside a <Record> start tag that starts at line \(recordLine)")
        let between = String(text[..<text.range(of: "</HealthData>")!.lowerBound])
        let path2 = try dir.write("between.xml", between)
        let end = ExportXMLPosition(line: between.filter { $0 == "\n" }.count + 1, offset: Int64(between.utf8.count))
        #expect(exportError(path2) == .truncatedXML(path: path2, inside: "<HealthData> element", line: rootLine, end: end))
        // Cut inside the DTD.
        let path3 = try dir.write("cut-dtd.xml", String(text.prefix(300)))
        let dtdEnd = ExportXMLPosition(line: String(text.prefix(300)).filter { $0 == "\n" }.count + 1, offset: 300)
        #expect(exportError(path3) == .truncatedXML(path: path3, inside: "DOCTYPE declaration", line: 2, end: dtdEnd))
    }

    @Test func onlyCommentsAndWhitespaceMayFollowTheRoot() throws {
        let dir = TemporaryDirectory("steplog-export")
        let text = ExportTestDocument.xml(records: Self.records) + "<!-- written by Health -->\n<?pi x?>\n\n"
        #expect(try AppleHealthExportProvider(path: try dir.write("ok.xml", text)).sampleCount == Self.records.count)
        let rootEnd = Self.position(of: "</HealthData>", in: text).line
        for (extra, what) in [("</Record>\n", "end tag </Record>"), (Self.records[0].xml, "<Record>"), ("steps\n", "text")] {
            let bad = text + extra
            let path = try dir.write("after.xml", bad)
            let at = ExportXMLPosition(line: text.filter { $0 == "\n" }.count + 1, offset: Int64(text.utf8.count))
            #expect(exportError(path) == .malformedXML(path: path, at: at, problem: .contentAfterRoot(what: what, rootClosedAtLine: rootEnd)))
        }
    }

    /// Positions stay exact across the reader's 2 MiB chunks (the byte
    /// offset and line of an element cut by a chunk boundary and carried).
    @Test func positionsAreExactAcrossChunks() throws {
        let dir = TemporaryDirectory("steplog-export")
        var body: [String] = []
        for i in 0..<20_000 {
            var record = ExportTestRecord.step(minute: i, count: i % 300)
            record.metadata = i % 5 == 0 ? [("HKExternalUUID", String(repeating: "q", count: i % 61))] : []
            body.append(record.xml)
        }
        body.insert("<Workout sourceName=\"late\">", at: 17_000)
        let text = ExportTestDocument.xml(body)
        #expect(text.utf8.count > 2 * ExportReader.chunkCapacity)
        let path = try dir.write("big.xml", text)
        let workout = Self.position(of: "<Workout sourceName=\"late\">", in: text)
        #expect(workout.offset > Int64(2 * ExportReader.chunkCapacity))
        guard case let .malformedXML(_, at, problem)? = exportError(path) else {
            Issue.record("expected a malformedXML error, got \(String(describing: exportError(path)))")
            return
        }
        #expect(at == workout)
        #expect(problem == .unclosedElement(name: "Workout", closedBy: "HealthData", closedAtLine: Self.position(of: "</HealthData>", in: text).line))
    }

    /// The scanner fed a few bytes at a time (carrying what it did not
    /// consume, as the reader does with its chunks) reports the same error at
    /// the same line and byte offset as fed everything at once.
    @Test func errorsAreTheSameWhateverTheBufferSizes() throws {
        let dir = TemporaryDirectory("steplog-export")
        var tagged = Self.records[1]
        tagged.metadata = [("HKExternalUUID", "X")]
        let broken = [
            Self.records.map(\.xml) + ["</Record>"],
            [tagged.xml, "<Workout sourceName=\"x\">"] + Self.records.map(\.xml),
            [Self.records[0].xml.replacingOccurrences(of: "value=\"10\"/>", with: "value=\"10/>"), Self.records[1].xml],
            // A start tag's name running into a '<' (found by the export-xml
            // fuzz target: the element was named "<MetadataEnt\u{FFFD}<Modified>"
            // when the buffer held all of it, "<>" when it ended inside the name).
            [Self.records[0].xml, "<MetadataEnt\u{FFFD}\u{FFFD}<Modified Date\" value=\"2016-04-18\"/>", Self.records[1].xml],
        ]
        // An element after the root (its name cut by a buffer's end was
        // named in part: found by the export-xml fuzz target).
        let afterRoot = ExportTestDocument.xml(Self.records.map(\.xml)) + "<Record type=\"HKQuantityTypeIdentifierStepCount\"/>\n"
        for text in broken.map({ ExportTestDocument.xml($0) }) + [afterRoot] {
            let whole = try #require(exportError(try dir.write("whole.xml", text)))
            for piece in [1, 7, 64, 4096] {
                #expect(Self.scanError(Array(text.utf8), piece: piece, path: dir.path + "/whole.xml") == whole, "pieces of \(piece)")
            }
        }
    }

    /// A byte-order mark cut by the end of a buffer is waited for, not taken
    /// for text before the root (found by the export-xml fuzz target; the
    /// reproducer is in its corpus).
    @Test func aByteOrderMarkSplitAcrossBuffersIsRead() throws {
        let dir = TemporaryDirectory("steplog-export")
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array(ExportTestDocument.xml(Self.records.map(\.xml)).utf8)
        #expect(exportError(try dir.write("bom.xml", bytes)) == nil)
        for piece in [1, 2, 3, 64] {
            #expect(Self.scanError(bytes, piece: piece, path: dir.path + "/bom.xml") == nil, "pieces of \(piece)")
        }
    }

    /// Runs the scanner over `bytes` handed `piece` bytes at a time.
    static func scanError(_ bytes: [UInt8], piece: Int, path: String) -> ExportError? {
        let scanner = HealthXMLScanner(path: path)
        var lines = ExportLineCounter()
        var carry: [UInt8] = []
        var lineAtCarry = 1
        do {
            var at = 0
            while at < bytes.count {
                let end = min(bytes.count, at + piece)
                var buffer = carry + bytes[at..<end]
                at = end
                let consumed = try buffer.withUnsafeMutableBufferPointer { b in
                    lines.reset(base: b.baseAddress!, lineAtBase: lineAtCarry)
                    let n = try scanner.scan(b.baseAddress!, count: b.count, atEnd: false, lines: &lines)
                    lineAtCarry = lines.line(at: n)
                    return n
                }
                carry = Array(buffer[consumed...])
            }
            carry.append(0)
            try carry.withUnsafeMutableBufferPointer { b in
                lines.reset(base: b.baseAddress!, lineAtBase: lineAtCarry)
                _ = try scanner.scan(b.baseAddress!, count: b.count - 1, atEnd: true, lines: &lines)
            }
            return nil
        } catch {
            return error as? ExportError
        }
    }

    /// Through `stepsync`: exit 1, one line naming the file, line and
    /// offset; the store it was given is not touched.
    @Test func theCommandExitsOneAndStoresNothing() throws {
        let dir = TemporaryDirectory("steplog-export")
        let tmp = TemporaryDirectory()
        let stepsync = builtProduct("stepsync")
        let store = tmp.sub("store")
        let good = try dir.write("good.xml", ExportTestDocument.xml(records: Array(Self.records.prefix(2))))
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", good]).code == 0)
        let before = try FileManager.default.contentsOfDirectory(atPath: store).sorted().filter { $0 != "LOCK" }
            .map { ($0, readFile(store + "/" + $0)) }
        let (bad, text, _) = try read(Self.records.map(\.xml) + ["</Record>"], in: dir, name: "bad.xml")
        let run = try runProgram(stepsync, ["ingest", "--store", store, "--source", bad], mergeStandardError: true)
        let at = Self.position(of: "</Record>", in: text)
        #expect(run.code == 1)
        #expect(run.lines.last == "stepsync ingest: \(bad): line \(at.line) (byte offset \(at.offset)): stray end tag </Record> (the open element is <HealthData> from line \(Self.position(of: "<HealthData", in: text).line))")
        let after = try FileManager.default.contentsOfDirectory(atPath: store).sorted().filter { $0 != "LOCK" }
            .map { ($0, readFile(store + "/" + $0)) }
        #expect(after.map(\.0) == before.map(\.0) && after.map(\.1) == before.map(\.1))
    }
}
