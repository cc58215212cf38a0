import Foundation
import Testing
@testable import StepSync

/// export.zip read in place: entry found by content, raw inflate and stored
/// entries, ZIP64, and the broken zips a user may hand over.
@Suite struct ExportZipTests {
    static let records = (0..<50).map { ExportTestRecord.step(minute: $0 * 3, count: $0 * 11) }
    static let exportXML = ExportTestDocument.xml(records: records)
    static let cda = "<?xml version=\"1.0\"?>\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\"><title>Export</title></ClinicalDocument>\n"

    /// A zip like the Health app's, with a localized export name.
    static func localizedZip(zip64: Bool = false, method: ExportTestZip.Method = .deflate) -> [UInt8] {
        let zip = ExportTestZip(zip64: zip64)
        zip.add("apple_health_export/", "", method: .stored)
        zip.add("apple_health_export/export_cda.xml", cda)
        zip.add("apple_health_export/eksport.xml", exportXML, method: method)
        zip.add("apple_health_export/workout-routes/route_2021-03-01_9.00am.gpx", "<gpx/>")
        zip.add("apple_health_export/electrocardiograms/ecg_2021-03-01.csv", "Name,X\n")
        return zip.finished()
    }

    @Test func localizedEntryIsFoundByContent() throws {
        let dir = TemporaryDirectory("steplog-export")
        let zipped = try AppleHealthExportProvider(path: try dir.write("export.zip", Self.localizedZip()))
        let plain = try AppleHealthExportProvider(path: try dir.write("export.xml", Self.exportXML))
        #expect(zipped.summary.input == "zip:apple_health_export/eksport.xml")
        #expect(zipped.sampleCount == 50)
        #expect(zipped.allSamples() == plain.allSamples())
        #expect(zipped.sourceIdentity == plain.sourceIdentity)
        #expect(zipped.summary.xmlBytes == Int64(Self.exportXML.utf8.count))
        #expect(zipped.summary.bytesRead < zipped.summary.xmlBytes)   // compressed input
    }

    @Test func storedEntriesAndZip64RecordsAreRead() throws {
        let dir = TemporaryDirectory("steplog-export")
        let stored = try AppleHealthExportProvider(path: try dir.write("stored.zip", Self.localizedZip(method: .stored)))
        #expect(stored.sampleCount == 50)
        let zip64 = try AppleHealthExportProvider(path: try dir.write("zip64.zip", Self.localizedZip(zip64: true)))
        #expect(zip64.allSamples() == stored.allSamples())
        // The ZIP64 fields really are what was read: the 32-bit ones are saturated.
        let file = try ExportInputFile(path: dir.path + "/zip64.zip")
        let entries = try ZipCentralDirectory.entries(of: file)
        let export = try #require(entries.first { $0.name.hasSuffix("eksport.xml") })
        #expect(export.uncompressedSize == Int64(Self.exportXML.utf8.count))
        #expect(export.localHeaderOffset > 0 && export.localHeaderOffset < 0xFFFF_FFFF)
    }

    @Test func excludedXMLEntriesAreNeverChosen() throws {
        let dir = TemporaryDirectory("steplog-export")
        // Larger decoys with a HealthData root, in places the export never is.
        let decoy = ExportTestDocument.xml(records: (0..<500).map { ExportTestRecord.step(minute: $0, count: 1) })
        let zip = ExportTestZip()
        zip.add("apple_health_export/export_cda.xml", decoy)
        zip.add("apple_health_export/workout-routes/route.xml", decoy)
        zip.add("apple_health_export/electrocardiograms/ecg.xml", decoy)
        zip.add("apple_health_export/notes.xml", Self.cda)
        zip.add("apple_health_export/exportar.xml", Self.exportXML)
        let provider = try AppleHealthExportProvider(path: try dir.write("export.zip", zip.finished()))
        #expect(provider.summary.input == "zip:apple_health_export/exportar.xml")
        #expect(provider.sampleCount == 50)
    }

    @Test func zipWithoutAHealthExport() throws {
        let dir = TemporaryDirectory("steplog-export")
        let zip = ExportTestZip()
        zip.add("apple_health_export/export_cda.xml", Self.cda)
        zip.add("apple_health_export/other.xml", Self.cda)
        zip.add("apple_health_export/readme.txt", "hello")
        let path = try dir.write("export.zip", zip.finished())
        #expect(exportError(path) == .noHealthExportInZip(path: path, xmlEntriesLookedAt: 1))
        #expect(exportError(path)?.description == "\(path): zip has no Apple Health export (looked at 1 .xml entry)")

        let empty = try dir.write("empty.zip", ExportTestZip().finished())
        #expect(exportError(empty) == .noHealthExportInZip(path: empty, xmlEntriesLookedAt: 0))
    }

    @Test func truncatedZipNamesTheByteOffset() throws {
        let dir = TemporaryDirectory("steplog-export")
        let whole = Self.localizedZip()
        for cut in [whole.count / 2, whole.count - 10, 40] {
            let path = try dir.write("cut-\(cut).zip", Array(whole.prefix(cut)))
            let error = try #require(exportError(path))
            guard case let .truncatedZip(errorPath, offset, _) = error else {
                Issue.record("cut at \(cut): \(error)")
                continue
            }
            #expect(errorPath == path && offset == Int64(cut))
            #expect(error.description.hasPrefix("\(path): truncated zip at byte offset \(cut): "))
            #expect(!error.description.contains("\n"))
        }
    }

    @Test func zipWhoseEntryDataIsCutButDirectoryIntact() throws {
        // The directory survives but claims more data than the file holds
        // before it (e.g. a zip spliced together): reported as truncation.
        let dir = TemporaryDirectory("steplog-export")
        let zip = ExportTestZip()
        zip.add("apple_health_export/export.xml", Self.exportXML, method: .stored)
        var bytes = zip.finished()
        // Claim a compressed size far beyond the end of the file.
        let central = try #require(Self.find([0x50, 0x4B, 0x01, 0x02], in: bytes))
        bytes[central + 20] = 0xFF; bytes[central + 21] = 0xFF; bytes[central + 22] = 0xFF; bytes[central + 23] = 0x7F
        let path = try dir.write("spliced.zip", bytes)
        guard case .truncatedZip = try #require(exportError(path)) else {
            Issue.record("expected truncatedZip, got \(String(describing: exportError(path)))")
            return
        }
    }

    @Test func corruptedCRCIsReported() throws {
        let dir = TemporaryDirectory("steplog-export")
        var bytes = Self.localizedZip()
        // The export entry's CRC in the central directory.
        let name = Array("apple_health_export/eksport.xml".utf8)
        var central = 0
        while let hit = Self.find([0x50, 0x4B, 0x01, 0x02], in: bytes, from: central) {
            if Array(bytes[(hit + 46)..<(hit + 46 + name.count)]) == name { central = hit; break }
            central = hit + 4
        }
        let crcOffset = central + 16
        let real = UInt32(bytes[crcOffset]) | UInt32(bytes[crcOffset + 1]) << 8 | UInt32(bytes[crcOffset + 2]) << 16 | UInt32(bytes[crcOffset + 3]) << 24
        bytes[crcOffset] ^= 0x5A
        let damaged = real ^ 0x5A
        let path = try dir.write("crc.zip", bytes)
        let error = try #require(exportError(path))
        guard case let .badCRC(errorPath, entry, offset, expected, actual) = error else {
            Issue.record("expected badCRC, got \(error)")
            return
        }
        #expect(errorPath == path && entry == "apple_health_export/eksport.xml")
        #expect(expected == damaged && actual == real)
        #expect(offset == Int64(Self.find(Array("PK\u{03}\u{04}".utf8), in: bytes, nameAfter: name)!))
        #expect(error.description.contains("byte offset \(offset)"))
    }

    @Test func corruptedDataInAStoredEntryFailsTheCRC() throws {
        let dir = TemporaryDirectory("steplog-export")
        var bytes = Self.localizedZip(method: .stored)
        let at = try #require(Self.find(Array("value=\"11\"".utf8), in: bytes))
        bytes[at + 7] = UInt8(ascii: "2")     // 11 steps become 21: only the CRC can tell
        let path = try dir.write("flip.zip", bytes)
        guard case .badCRC = try #require(exportError(path)) else {
            Issue.record("expected badCRC, got \(String(describing: exportError(path)))")
            return
        }
    }

    @Test func corruptedDeflateDataIsReported() throws {
        let dir = TemporaryDirectory("steplog-export")
        var bytes = Self.localizedZip()
        let header = try #require(Self.find(Array("PK\u{03}\u{04}".utf8), in: bytes, nameAfter: Array("apple_health_export/eksport.xml".utf8)))
        let data = header + 30 + "apple_health_export/eksport.xml".utf8.count
        for i in 0..<64 { bytes[data + 40 + i] = 0xFF }
        let path = try dir.write("garbled.zip", bytes)
        let error = try #require(exportError(path))
        switch error {
        case .damagedZip, .badCRC: #expect(error.description.hasPrefix(path + ": "))
        default: Issue.record("expected a zip data error, got \(error)")
        }
    }

    /// An entry whose deflate data inflates past its declared size and then
    /// stops without an end-of-stream marker is reported as the overrun,
    /// which comes first, whatever size the caller reads in. (Found by the
    /// zip fuzz target: read 64 KiB at a time it was called cut off, a byte
    /// at a time an overrun. The reproducer is in the fuzz corpus.)
    @Test func anOverlongCutEntryIsTheSameErrorWhateverTheReadSize() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus/zip/regression-overlong-and-cut-deflate")
        let input = try Data(contentsOf: corpus)
        let dir = TemporaryDirectory("steplog-export")
        let path = try dir.write("overlong.zip", Array(input.dropFirst()))   // the fuzz input's first byte is its mode
        let file = try ExportInputFile(path: path)
        let entry = try #require(try ZipCentralDirectory.entries(of: file).first { $0.name == "apple_health_export/export.xml" })
        #expect(entry.uncompressedSize == 2165)
        for capacity in [1, 7, 4096, 64 << 10] {
            let reader = try ZipEntryReader(file: file, entry: entry)
            var buffer = [UInt8](repeating: 0, count: capacity)
            var produced = 0
            let error = #expect(throws: ExportError.self) {
                while true {
                    let n = try buffer.withUnsafeMutableBufferPointer { try reader.read(into: $0.baseAddress!, capacity: capacity) }
                    if n == 0 { break }
                    produced += n
                }
            }
            #expect(error?.description.contains("inflates to more than the 2165 bytes its directory record declares") == true,
                    "read \(capacity) at a time: \(String(describing: error))")
            #expect(produced <= 2165)
        }
    }

    /// The benchmark's export (`stepbench export generate`: the same
    /// generator and zip writer, from Tests/Support) reads back with every
    /// step record it wrote, streamed through a deflated ZIP64 entry.
    @Test func theBenchmarksSyntheticExportReadsBack() throws {
        let dir = TemporaryDirectory("steplog-export")
        let output = ZipMemoryOutput()
        let zip = ExportZipWriter(output: output, zip64: true)
        let entry = try zip.beginEntry("apple_health_export/export.xml", mayExceed4GiB: true)
        var writer = SyntheticExportWriter(seed: 7) { try entry.write($0) }
        try writer.writeExport(atLeast: 3_000_000)
        try zip.finish(entry)
        for (name, text) in SyntheticExport.sideFiles { try zip.add(name, text) }
        try zip.close()
        let provider = try AppleHealthExportProvider(path: try dir.write("synthetic.zip", output.bytes))
        #expect(provider.summary.input == "zip:apple_health_export/export.xml")
        #expect(provider.summary.xmlBytes == writer.bytesWritten)
        #expect(provider.sampleCount == writer.stepRecords && writer.stepRecords > 1_000)
        #expect(provider.summary.malformedStepRecords == 0 && provider.summary.outOfContractStepRecords == 0)
        #expect(provider.summary.nestedStepRecordsSkipped == 0 && provider.summary.duplicatesCollapsed == 0)
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int = 0) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        var i = from
        while i <= bytes.count - needle.count {
            if bytes[i] == needle[0], Array(bytes[i..<(i + needle.count)]) == needle { return i }
            i += 1
        }
        return nil
    }

    /// The local header whose name is `name`.
    static func find(_ signature: [UInt8], in bytes: [UInt8], nameAfter name: [UInt8]) -> Int? {
        var from = 0
        while let hit = find(signature, in: bytes, from: from) {
            if hit + 30 + name.count <= bytes.count, Array(bytes[(hit + 30)..<(hit + 30 + name.count)]) == name { return hit }
            from = hit + 4
        }
        return nil
    }
}
