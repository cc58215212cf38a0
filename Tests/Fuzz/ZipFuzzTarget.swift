// Fuzz target `zip`: the export.zip reader (Sources/StepSync/Export/Container):
// the central directory (EOCD, ZIP64 locator and record, ZIP64 extras), the
// search for the export entry by content, and every entry streamed through
// ZipEntryReader (local header, stored copy or raw inflate, size and CRC-32
// checks), from a file as `stepsync ingest --source export:` reads it.
//
// Input: a byte choosing the read size (1 + byte × 256), then the zip.
//
// Invariants beyond "no crash":
// - an entry read to its end produced exactly its declared size (a CRC or
//   size mismatch must be an error, never a short or long success);
// - the bytes and the outcome (finished, or the error) of reading an entry
//   do not depend on the read size;
// - `inputPosition` never passes the end of the file.
import Foundation
@testable import StepSync

private let zipPath = fuzzScratchDirectory + "/export.zip"
/// At most this much of an entry is inflated (a small input can declare and
/// inflate to gigabytes; the limit keeps each run short), and this much in
/// small pieces (compared with the first bytes of the other read).
private let readLimit = 4 << 20
private let smallReadLimit = 64 << 10

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzZip(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    fuzzWriteFile(zipPath, UnsafeRawBufferPointer(start: data + 1, count: size - 1))
    guard let file = try? ExportInputFile(path: zipPath) else { fuzzCheck(false, "cannot open the written zip"); return 0 }
    _ = ExportInputKind.detect(Array(UnsafeBufferPointer(start: data + 1, count: min(size - 1, ExportInputKind.sniffLength))))
    guard let entries = try? ZipCentralDirectory.entries(of: file) else { return 0 }
    _ = try? ExportZipEntryFinder.find(in: file, entries: entries)
    let small = 1 + Int(data[0]) * 256
    for entry in entries.prefix(16) {
        let whole = read(entry, file: file, capacity: 64 << 10, limit: readLimit)
        let pieces = read(entry, file: file, capacity: small, limit: smallReadLimit)
        if pieces.finished || pieces.error != nil {
            fuzzCheck(whole == pieces, "entry '\(entry.name)' reads differently in pieces of \(small) bytes: \(whole) vs \(pieces)")
        } else {
            fuzzCheck(whole.error != nil || whole.bytes.starts(with: pieces.bytes),
                      "entry '\(entry.name)' reads other bytes in pieces of \(small) bytes")
        }
    }
    return 0
}

private struct EntryRead: Equatable, CustomStringConvertible {
    var bytes: [UInt8] = []
    var finished = false
    var error: String?
    var description: String { "\(bytes.count) bytes, \(finished ? "finished" : "stopped"), error \(error ?? "-")" }
}

private func read(_ entry: ZipEntry, file: ExportInputFile, capacity: Int, limit: Int) -> EntryRead {
    var result = EntryRead()
    do {
        let reader = try ZipEntryReader(file: file, entry: entry)
        var buffer = [UInt8](repeating: 0, count: capacity)
        while result.bytes.count < limit {
            let n = try buffer.withUnsafeMutableBufferPointer { try reader.read(into: $0.baseAddress!, capacity: capacity) }
            fuzzCheck(reader.inputPosition <= file.size, "input position \(reader.inputPosition) past the end \(file.size)")
            if n == 0 {
                result.finished = true
                fuzzCheck(Int64(result.bytes.count) == entry.uncompressedSize,
                          "entry '\(entry.name)' ended after \(result.bytes.count) bytes, declared \(entry.uncompressedSize)")
                break
            }
            result.bytes += buffer[0..<n]
        }
    } catch {
        result.error = String(describing: error)
    }
    // A read that failed is compared on its error (how far it got depends on
    // the read size, and so does the offset some errors name: where the
    // reader was when it noticed).
    if let error = result.error {
        result.bytes = []
        result.error = error.replacingOccurrences(of: #"at byte offset [0-9]+"#, with: "at byte offset N", options: .regularExpression)
    }
    return result
}
