import Foundation
import StepLog
import StepSync
import ToolSupport

/// Builds the provider a `--source` names; reading an export shows progress
/// (bytes, MB/s, ETA), stops early on `stop`, and reports what was skipped.
enum SourceFactory {
    /// What `--source` takes, for messages.
    static let choices = "the path of an Apple Health export.zip / export.xml, or mock[:…] for made-up steps"

    /// `--source`, which has no default: the mock is used only when asked for.
    static func requiredSource(_ args: Arguments) throws -> String {
        guard let text = args.value("source") else { throw Arguments.UsageError("--source is required: \(choices)") }
        return text
    }

    /// Refuses a `--source` naming no file, or a folder: a usage error found
    /// before any work.
    static func check(_ spec: SourceSpec) throws {
        guard case .export(let path) = spec else { return }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw SourceSpecError("--source \(path): no such file (give \(choices))")
        }
        if isDirectory.boolValue { throw SourceSpecError(folderMessage(path)) }
    }

    static func provider(for spec: SourceSpec, progress: ProgressLine, stop: StopSignal? = nil) throws -> StepDataProvider {
        try check(spec)
        switch spec {
        case .mock(let configuration):
            return MockStepDataProvider(configuration: configuration)
        case .export(let path):
            defer { progress.finish() }
            let provider = try AppleHealthExportProvider(path: path, stop: stop) { p in
                // The read's first report comes before any byte: worth a line a
                // terminal redraws, not one a log keeps ("0 B … (0 B/s)").
                if p.bytesRead == 0 {
                    if progress.isInteractive { progress.update("reading export: 0 B of \(Format.bytes(p.totalBytes))") }
                    return
                }
                let seconds = progress.elapsed
                let rate = seconds > 0 ? Double(p.bytesRead) / seconds : 0
                let eta = rate > 0 ? " ETA " + Format.duration(Double(p.totalBytes - p.bytesRead) / rate) : ""
                progress.update("reading export: \(Format.bytes(p.bytesRead)) of \(Format.bytes(p.totalBytes)) (\(Format.bytes(Int64(rate)))/s\(eta)), \(Format.bytes(p.xmlBytes)) of XML, \(Format.count(p.stepRecordsKept)) step records")
            }
            progress.finish()
            report(provider.summary)
            if let unreadable = provider.summary.everyStepRecordSkipped(path: path) { throw unreadable }
            return provider
        }
    }

    /// A folder given as the export: the Files app and Safari unzip
    /// export.zip into `apple_health_export/`, which holds `export.xml`.
    static func folderMessage(_ path: String) -> String {
        let base = path.hasSuffix("/") ? String(path.dropLast()) : path
        let inside = [base + "/export.xml", base + "/apple_health_export/export.xml"]
            .first { FileManager.default.fileExists(atPath: $0) }
        if let inside { return "--source \(path) is a folder (an unzipped export): give the export.xml in it, --source \(inside)" }
        return "--source \(path) is a folder, not an export: give the export.zip the Health app shared, or the export.xml inside it once unzipped"
    }

    /// One summary line on stderr, plus the first records skipped.
    static func report(_ s: ExportReadSummary) {
        let err = StepSyncTool.err
        let rate = s.seconds > 0 ? Double(s.xmlBytes) / s.seconds : 0
        err.line("read \(s.input): \(Format.count(s.recordsKept)) step records from \(Format.bytes(s.xmlBytes)) of XML in \(Format.duration(s.seconds)) (\(Format.bytes(Int64(rate)))/s)"
                 + (s.duplicatesCollapsed > 0 ? ", \(Format.count(s.duplicatesCollapsed)) duplicates collapsed" : "")
                 + (s.syncVersionsReplaced > 0 ? ", \(Format.count(s.syncVersionsReplaced)) replaced by a newer sync version" : "")
                 + (s.malformedStepRecords > 0 ? ", \(Format.count(s.malformedStepRecords)) malformed step records skipped" : "")
                 + (s.outOfContractStepRecords > 0 ? ", \(Format.count(s.outOfContractStepRecords)) outside the sample contract skipped" : ""))
        for example in s.malformedExamples { err.line("  skipped: \(example)") }
        for example in s.outOfContractExamples { err.line("  skipped (outside the sample contract): \(example)") }
        for notice in s.notices { err.line("  note: \(notice)") }
    }

    /// The read's figures as the `read` object of `ingest --json`.
    static func write(_ s: ExportReadSummary, into w: inout JSONWriter) {
        w.beginObject()
        w.field("input", s.input)
        w.field("xmlBytes", s.xmlBytes)
        w.field("stepRecordsKept", s.recordsKept)
        w.field("duplicatesCollapsed", s.duplicatesCollapsed)
        w.field("syncVersionsReplaced", s.syncVersionsReplaced)
        w.field("nestedStepRecordsSkipped", s.nestedStepRecordsSkipped)
        func skipped(_ name: String, _ count: Int, _ examples: [ExportSkippedRecord]) {
            w.key(name); w.beginObject()
            w.field("count", count)
            w.key("examples"); w.beginArray()
            for example in examples {
                w.beginObject()
                w.field("line", example.line)
                if let field = example.field { w.field("field", field.rawValue) }
                w.field("reason", example.reason)
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
        skipped("malformed", s.malformedStepRecords, s.malformedExamples)
        skipped("outOfContract", s.outOfContractStepRecords, s.outOfContractExamples)
        w.field("fractionalStepRecords", s.fractionalStepRecords)
        w.field("roundedStepRecords", s.roundedStepRecords)
        w.field("lenientStepRecords", s.lenientStepRecords)
        w.field("exportDate", s.exportDateMilliseconds.map { ISO8601.format(milliseconds: $0) })
        if let unreadable = s.unreadableExportDate { w.field("unreadableExportDate", unreadable) }
        w.key("otherExportsInZip"); w.beginArray()
        for other in s.otherExportsInZip {
            w.beginObject()
            w.field("entry", other.entry)
            w.field("exportDate", other.exportDateMilliseconds.map { ISO8601.format(milliseconds: $0) })
            w.field("bytes", other.bytes)
            w.endObject()
        }
        w.endArray()
        w.key("notices"); w.beginArray()
        for notice in s.notices { w.value(notice) }
        w.endArray()
        w.key("seconds"); w.value(s.seconds)
        w.endObject()
    }
}
