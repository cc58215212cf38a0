import Foundation
import Testing
@testable import StepSync

/// Damaged input never crashes the reader and never passes as good data: a
/// truncation loop over the zip's tail, and seeded byte flips in zip and XML.
@Suite struct ExportDamageTests {
    static let records = (0..<40).map { ExportTestRecord.step(minute: $0 * 5, count: 100 + $0) }
    static let xml = ExportTestDocument.xml(records: records)

    static func zip() -> [UInt8] {
        let zip = ExportTestZip()
        zip.add("apple_health_export/export_cda.xml", "<ClinicalDocument/>")
        zip.add("apple_health_export/export.xml", xml)
        return zip.finished()
    }

    @Test func everyTruncationOfTheZipTailIsReported() throws {
        let dir = TemporaryDirectory("steplog-export")
        let whole = Self.zip()
        var random = SplitMix64(seed: 11)
        // Every cut in the last 300 bytes (the directory), a sample before.
        var cuts = Array(max(0, whole.count - 300)..<whole.count)
        for _ in 0..<60 { cuts.append(Int(random.next() % UInt64(whole.count))) }
        for cut in cuts {
            let path = try dir.write("cut.zip", Array(whole.prefix(cut)))
            switch exportError(path) {
            case .truncatedZip?, .damagedZip?, .notZipOrXML?: break     // < 4 bytes is not a zip at all
            case let other: Issue.record("cut at \(cut) of \(whole.count): \(String(describing: other))")
            }
        }
    }

    @Test func flippedZipBytesFailOrChangeNothing() throws {
        let dir = TemporaryDirectory("steplog-export")
        let whole = Self.zip()
        let good = try AppleHealthExportProvider(path: try dir.write("good.zip", whole)).allSamples()
        var random = SplitMix64(seed: 12)
        var failures = 0
        for _ in 0..<300 {
            var bytes = whole
            let at = Int(random.next() % UInt64(bytes.count))
            bytes[at] ^= UInt8(1 + random.next() % 255)
            let path = try dir.write("flip.zip", bytes)
            do {
                let samples = try AppleHealthExportProvider(path: path).allSamples()
                // Accepted only when the export's bytes are intact (CRC-checked).
                #expect(samples == good, "flip at \(at)")
            } catch is ExportError {
                failures += 1
            }
        }
        #expect(failures > 100)    // most flips land in the compressed data
    }

    /// A byte changed in the export entry's deflate data garbles the XML at
    /// once, while the CRC-32 is checked only at the entry's end: such a file
    /// is reported as damaged, naming the entry and what to do, never as
    /// malformed XML ("'<' inside the <Record> tag" for 3 of 4 such changes
    /// before), nor as a zip without an export.
    @Test func aChangedByteInTheCompressedExportSaysTheFileIsDamaged() throws {
        let dir = TemporaryDirectory("steplog-export")
        let whole = Self.zip()
        let good = try AppleHealthExportProvider(path: try dir.write("good.zip", whole)).allSamples()
        let file = try ExportInputFile(path: try dir.write("entry.zip", whole))
        let entry = try #require(try ZipCentralDirectory.entries(of: file).first { $0.name == "apple_health_export/export.xml" })
        let start = Int(try ZipEntryReader(file: file, entry: entry).dataOffset), count = Int(entry.compressedSize)
        var random = SplitMix64(seed: 35)
        var damaged = 0
        for _ in 0..<200 {
            var bytes = whole
            let at = start + Int(random.next() % UInt64(count))
            bytes[at] ^= UInt8(1 + random.next() % 255)
            let path = try dir.write("flip.zip", bytes)
            do {
                // A change in the last byte's unused bits changes nothing.
                #expect(try AppleHealthExportProvider(path: path).allSamples() == good, "flip at \(at)")
            } catch let error as ExportError {
                damaged += 1
                #expect(!error.isAboutTheXML, "flip at \(at): \(error)")
                #expect(error.description.contains("'apple_health_export/export.xml'"), "flip at \(at): \(error)")
                #expect(error.description.hasSuffix("; the file is damaged: export it again from the Health app"), "flip at \(at): \(error)")
            }
        }
        #expect(damaged > 190)
    }

    @Test func flippedXMLBytesNeverCrashAndKeepTheContract() throws {
        let dir = TemporaryDirectory("steplog-export")
        let whole = Array(Self.xml.utf8)
        var random = SplitMix64(seed: 13)
        for _ in 0..<300 {
            var bytes = whole
            for _ in 0..<(1 + random.next() % 4) {
                let at = Int(random.next() % UInt64(bytes.count))
                bytes[at] = UInt8(truncatingIfNeeded: random.next())
            }
            let path = try dir.write("flip.xml", bytes)
            guard let provider = try? AppleHealthExportProvider(path: path) else {
                #expect(exportError(path) != nil)       // only ExportErrors are thrown
                continue
            }
            let samples = provider.allSamples()
            #expect(samples.count + provider.summary.malformedStepRecords <= Self.records.count + 1)
            let all = DateInterval(start: Date(timeIntervalSince1970: -1e10), end: Date(timeIntervalSince1970: 1e11))
            #expect(provider.getAggregatedStepCount(for: all) == samples.reduce(0) { $0 + $1.count })
        }
    }
}
