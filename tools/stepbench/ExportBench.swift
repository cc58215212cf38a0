import Foundation
import StepSync
import StepTestSupport

/// `stepbench export …`: the Apple Health export benchmark.
///
/// - `generate --out PATH.zip --size-mb N [--seed S] [--entry NAME] [--zip64]`
///   writes a realistic export.zip holding at least N MB (10^6 bytes) of XML
///   from `SyntheticExportWriter` (day after day of interleaved records,
///   correlations, workouts with routes, activity summaries; see its doc),
///   plus the side files a real zip holds (export_cda.xml, a workout route,
///   an ECG), through `ExportZipWriter`: raw deflate through the system zlib,
///   ZIP64 records when the sizes need them (or `--zip64`). With
///   `--drop-steps F --export-date D`, the same export as a newer one of the
///   same Health store: a fraction F of its step records gone, ExportDate D
///   (the re-import benchmark).
/// - `import PATH` reads the file with `AppleHealthExportProvider` and prints
///   XML MB/s, input MB/s, step records, seconds and peak RSS (VmHWM).
enum ExportBench {
    static let usage = """
        usage: stepbench export generate --out PATH.zip --size-mb N [--seed S] [--entry NAME] [--zip64] [--no-dtd]
                                         [--drop-steps FRACTION] [--export-date 'YYYY-MM-DD HH:MM:SS ±HHMM']
               stepbench export import PATH
        """

    static func run(arguments: [String]) throws {
        guard let command = arguments.first else { throw ExportBenchUsageError(usage) }
        let options = Array(arguments.dropFirst())
        switch command {
        case "generate":
            var out: String?
            var sizeMB: Int?
            var seed: UInt64 = 1
            var entry = "apple_health_export/export.xml"
            var zip64 = false
            var dtd = true
            var drop = 0.0
            var exportDate: String?
            var i = 0
            func value() throws -> String {
                i += 1
                guard i < options.count else { throw ExportBenchUsageError("\(options[i - 1]) needs a value\n\(usage)") }
                return options[i]
            }
            while i < options.count {
                switch options[i] {
                case "--out": out = try value()
                case "--size-mb":
                    let text = try value()
                    guard let n = Int(text), n > 0 else { throw ExportBenchUsageError("--size-mb must be a positive whole number, found '\(text)'") }
                    sizeMB = n
                case "--seed":
                    let text = try value()
                    guard let n = UInt64(text) else { throw ExportBenchUsageError("--seed must be a non-negative whole number, found '\(text)'") }
                    seed = n
                case "--entry": entry = try value()
                case "--zip64": zip64 = true
                case "--no-dtd": dtd = false
                case "--drop-steps":
                    let text = try value()
                    guard let f = Double(text), f >= 0, f < 1 else { throw ExportBenchUsageError("--drop-steps must be a fraction in 0..<1, found '\(text)'") }
                    drop = f
                case "--export-date": exportDate = try value()
                default: throw ExportBenchUsageError("unknown option \(options[i])\n\(usage)")
                }
                i += 1
            }
            guard let out, let sizeMB else { throw ExportBenchUsageError("generate needs --out and --size-mb\n\(usage)") }
            try generate(out: out, xmlBytes: Int64(sizeMB) * 1_000_000, seed: seed, entryName: entry, forceZip64: zip64, dtd: dtd,
                         droppedStepFraction: drop, exportDate: exportDate)
        case "import":
            guard options.count == 1 else { throw ExportBenchUsageError(usage) }
            try importExport(options[0])
        default:
            throw ExportBenchUsageError("unknown export command \(command)\n\(usage)")
        }
    }

    // MARK: - import

    static func importExport(_ path: String) throws {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        log("export import \(path) (\(fmt(Double(size) / 1e6, 1)) MB)")
        let started = DispatchTime.now().uptimeNanoseconds
        let (provider, seconds) = try measure {
            try AppleHealthExportProvider(path: path) { progress in
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                let fraction = progress.totalBytes > 0 ? Double(progress.bytesRead) / Double(progress.totalBytes) : 0
                let eta = fraction > 0 ? elapsed / fraction - elapsed : 0
                log(String(format: "  %.0f/%.0f MB read, %.0f MB XML (%.0f MB/s), %d step records, ETA %.0fs",
                           Double(progress.bytesRead) / 1e6, Double(progress.totalBytes) / 1e6,
                           Double(progress.xmlBytes) / 1e6, Double(progress.xmlBytes) / 1e6 / max(elapsed, 1e-9),
                           progress.stepRecordsKept, eta))
            }
        }
        let summary = provider.summary
        let peak = residentMemory().peak
        print("export import \(path): \(summary.input)")
        print("  XML:           \(fmt(Double(summary.xmlBytes) / 1e6, 1)) MB at \(fmt(Double(summary.xmlBytes) / 1e6 / seconds, 1)) MB/s")
        print("  input:         \(fmt(Double(summary.bytesRead) / 1e6, 1)) MB at \(fmt(Double(summary.bytesRead) / 1e6 / seconds, 1)) MB/s")
        print("  step records:  \(summary.recordsKept) kept, \(summary.duplicatesCollapsed) duplicates collapsed, "
              + "\(summary.nestedStepRecordsSkipped) nested in correlations, \(summary.malformedStepRecords) malformed")
        print("  seconds:       \(fmt(seconds, 3))")
        print("  peak RSS:      \(mib(peak)) (VmHWM)")
        print("  sourceIdentity \(provider.sourceIdentity)")
    }

    // MARK: - generate

    /// `dtd: false` leaves out the (malformed iOS 16) DOCTYPE: strict XML
    /// parsers, such as the healthkit-to-sqlite peer's, stop at that DTD.
    /// The XML comes from `SyntheticExportWriter` and the zip from
    /// `ExportZipWriter` (Tests/Support, shared with the tests), written
    /// through StepLog's `FileDescriptor`.
    static func generate(out: String, xmlBytes target: Int64, seed: UInt64, entryName: String, forceZip64: Bool, dtd: Bool = true,
                         droppedStepFraction: Double = 0, exportDate: String? = nil) throws {
        log("export generate \(out): at least \(target / 1_000_000) MB of XML in '\(entryName)', seed \(seed)")
        let (_, seconds) = try measure {
            let file = try ZipFileOutput(path: out)
            let zip = ExportZipWriter(output: file, zip64: forceZip64)
            // The exported XML comes first, as in Apple's zips; ZIP64 fields
            // when the sizes could pass 4 GiB (the target plus a day of slack).
            let entry = try zip.beginEntry(entryName, mayExceed4GiB: target + (64 << 20) >= Int64(UInt32.max))
            var writer = SyntheticExportWriter(seed: seed) { try entry.write($0) }
            writer.includeDTD = dtd
            writer.droppedStepFraction = droppedStepFraction
            if let exportDate { writer.exportDate = exportDate }
            try writer.writeExport(atLeast: target)
            try zip.finish(entry)
            for (name, text) in SyntheticExport.sideFiles { try zip.add(name, text) }
            try zip.close()
            try file.sync()
            log("  \(fmt(Double(writer.bytesWritten) / 1e6, 1)) MB of XML, \(writer.stepRecords) step records, "
                + "\(writer.days) days" + (droppedStepFraction > 0 ? ", \(writer.stepRecordsDropped) step records left out" : ""))
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? NSNumber)?.int64Value ?? 0
        log("  wrote \(fmt(Double(size) / 1e6, 1)) MB zip in \(fmt(seconds, 1)) s")
    }

    fileprivate static func log(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// A usage mistake: the message to print (the caller exits non-zero).
struct ExportBenchUsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
