// Fuzz target `export-xml`: the Apple Health export scanner and the step
// record builder behind it (Sources/StepSync/Export/XML and Record), fed the
// XML a buffer at a time the way ExportReader does (the bytes a scan leaves
// unconsumed are offered again, followed by the next ones).
//
// Input: a byte giving the piece size (1 + byte × 64), then the XML.
//
// Invariants beyond "no crash":
// - what is kept (step records, sources, sync versions, skipped-record
//   counts and examples, the export date) and the error that stops the scan,
//   with its line and byte offset, do not depend on how the XML is split;
// - a scan never claims to have consumed more bytes than it was given.
import Foundation
@testable import StepSync

/// A fixed clock, so that the sample contract's "not in the future" check is deterministic.
private let now: Int64 = 1_790_000_000_000

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzExportXML(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let xml = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = scan(xml, piece: max(xml.count, 1))
    let pieces = scan(xml, piece: 1 + Int(data[0]) * 64)
    fuzzCheck(whole == pieces, "the scan depends on how the XML is split:\n  whole:  \(whole)\n  pieces: \(pieces)")
    return 0
}

private struct Outcome: Equatable, CustomStringConvertible {
    var records: [ExportStepRecord] = []
    var sources: [ExportSourceTable.Source] = []
    var synced: [ExportSyncedRecord] = []
    var replaced: [ExportSyncedRecord] = []
    var malformed = 0, outOfContract = 0, nested = 0, lenient = 0, fractional = 0
    var examples: [ExportSkippedRecord] = []
    var exportDate: Int64?
    var error: String?

    var description: String {
        "\(records.count) records, \(sources.count) sources, \(synced.count)/\(replaced.count) synced/replaced, "
            + "malformed \(malformed), fractional \(fractional), out of contract \(outOfContract), nested \(nested), "
            + "lenient \(lenient), date \(exportDate.map(String.init) ?? "-"), "
            + "error \(error ?? "-")"
    }
}

private func scan(_ xml: [UInt8], piece: Int) -> Outcome {
    let scanner = HealthXMLScanner(path: "export.xml", nowMilliseconds: now, expectedRecords: 16)
    var outcome = Outcome()
    var carry: [UInt8] = []
    var lines = ExportLineCounter()
    var lineAtCarry = 1
    var at = 0
    func offer(atEnd: Bool) throws {
        carry.append(0) // a byte past the end, so the buffer is never empty; not offered
        defer { carry.removeLast() }
        let count = carry.count - 1
        let consumed = try carry.withUnsafeBufferPointer { buffer -> Int in
            lines.reset(base: buffer.baseAddress!, lineAtBase: lineAtCarry)
            let consumed = try scanner.scan(buffer.baseAddress!, count: count, atEnd: atEnd, lines: &lines)
            fuzzCheck(consumed >= 0 && consumed <= count, "scan consumed \(consumed) of \(count) bytes")
            lineAtCarry = lines.line(at: consumed)
            return consumed
        }
        carry.removeSubrange(0..<consumed)
    }
    // As ExportReader does: while one element is larger than the carry's
    // usual room, gather bytes until the carry has doubled before scanning
    // again (the reader's room is 64 KiB; 256 bytes here, to reach that path).
    var gatherUntil = 0
    do {
        while at < xml.count {
            let end = min(xml.count, at + piece)
            carry += xml[at..<end]
            at = end
            if carry.count >= gatherUntil { try offer(atEnd: false) }
            gatherUntil = carry.count > 256 ? max(gatherUntil, 2 * carry.count) : 0
        }
        try offer(atEnd: true)
    } catch {
        outcome.error = String(describing: error)
    }
    outcome.records = scanner.builder.records
    outcome.sources = scanner.builder.resolvedSources()
    (outcome.synced, outcome.replaced) = scanner.builder.sync.resolve()
    outcome.malformed = scanner.malformedStepRecords
    outcome.outOfContract = scanner.outOfContractStepRecords
    outcome.nested = scanner.nestedStepRecordsSkipped
    outcome.lenient = scanner.lenientStepRecords
    outcome.fractional = scanner.builder.fractionalValues
    outcome.examples = scanner.malformedExamples + scanner.outOfContractExamples
    outcome.exportDate = scanner.exportDateMilliseconds
    return outcome
}
