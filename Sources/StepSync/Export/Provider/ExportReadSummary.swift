/// What one pass over an export found: the figures an import reports.
public struct ExportReadSummary: Sendable, Equatable {
    /// How many examples of malformed records are kept (the count is exact).
    public static let maxSkippedExamples = 5

    /// Step samples the provider serves (after duplicates are collapsed).
    public var recordsKept = 0
    /// Step records skipped because they cannot be a sample (bad date, value, …).
    public var malformedStepRecords = 0
    /// The first `maxSkippedExamples` of them, in file order.
    public var malformedExamples: [ExportSkippedRecord] = []
    /// Well-formed step records outside the sample contract (`SampleContract`):
    /// never stored, since the server would refuse them.
    public var outOfContractStepRecords = 0
    /// The first `maxSkippedExamples` of them, in file order, with the field each breaks.
    public var outOfContractExamples: [ExportSkippedRecord] = []
    /// Step records whose identity equalled one already kept (same fields, same UUID).
    public var duplicatesCollapsed = 0
    /// Step records replaced by a higher `HKMetadataKeySyncVersion` of the
    /// same sync identifier in this export (not served).
    public var syncVersionsReplaced = 0
    /// Step records nested in a `<Correlation>` (they also appear at top level; not taken twice).
    public var nestedStepRecordsSkipped = 0
    /// Step records whose value has a fraction (`2741.7`): kept, in
    /// thousandths of a step.
    public var fractionalStepRecords = 0
    /// Of `fractionalStepRecords`: those with digits past the third decimal,
    /// rounded half to even to the thousandth (docs/EXPORT.md).
    public var roundedStepRecords = 0
    /// Of `malformedStepRecords`: those with a missing or unreadable date or
    /// source name, or a broken tag — what an unknown format looks like.
    public var unreadableFieldStepRecords = 0
    /// Step records read past words in their tag that are not `name="value"`
    /// (an iOS 8 export's metadata keys with spaces), their step attributes sound.
    public var lenientStepRecords = 0
    /// The `<ExportDate>`'s value, quoted, when it is there but not a date
    /// (then `exportDateMilliseconds` is nil and no deletions can be applied).
    public var unreadableExportDate: String?
    /// The zip's other exports, not read (the newest `ExportDate` was).
    public var otherExportsInZip: [ExportZipOtherExport] = []
    /// How far into the input file reading got: its size for an XML file,
    /// the end of the export entry's compressed data for a zip.
    public var bytesRead: Int64 = 0
    /// Bytes of XML scanned.
    public var xmlBytes: Int64 = 0
    /// Wall-clock seconds of the whole read (detection, scan, sort).
    public var seconds: Double = 0
    /// "xml", or "zip:" followed by the chosen entry's name.
    public var input = ""
    /// The export's `<ExportDate value=…>` in ms since 1970, when present and valid.
    public var exportDateMilliseconds: Int64?

    public init() {}

    /// What was passed over, one line each, for people: another export in
    /// the zip, an ExportDate that cannot be read (so no deletions), records
    /// read leniently, values rounded to the thousandth. Empty when nothing was.
    public var notices: [String] {
        var lines: [String] = []
        if !otherExportsInZip.isEmpty {
            func date(_ milliseconds: Int64?) -> String {
                milliseconds.map { "ExportDate " + ISO8601.format(milliseconds: $0) } ?? "no ExportDate that can be read"
            }
            let entry = input.hasPrefix("zip:") ? String(input.dropFirst(4)) : input
            let others = otherExportsInZip.map { "'\($0.entry)' (\(date($0.exportDateMilliseconds)))" }.joined(separator: ", ")
            lines.append("the zip holds \(otherExportsInZip.count + 1) exports: read '\(entry)' (\(date(exportDateMilliseconds)), "
                         + "the newest); not read: \(others)")
        }
        if exportDateMilliseconds == nil {
            let why = unreadableExportDate.map { "its ExportDate \($0) cannot be read" } ?? "it has no ExportDate"
            lines.append("\(why), so this import deletes nothing: stored samples this export no longer holds are kept")
        }
        if lenientStepRecords > 0 {
            lines.append("\(lenientStepRecords) step \(lenientStepRecords == 1 ? "record" : "records") read leniently "
                         + "(words in the tag that are not name=\"value\", such as an iOS 8 export's metadata keys with spaces)")
        }
        if roundedStepRecords > 0 {
            lines.append("\(roundedStepRecords) step \(roundedStepRecords == 1 ? "value" : "values") with more than three decimals "
                         + "rounded to the thousandth of a step")
        }
        return lines
    }

    /// When the export has step records and every one was skipped: why, for
    /// an import to refuse with (nothing to store looks like success
    /// otherwise). Nil when some were kept, or there were none.
    public func everyStepRecordSkipped(path: String) -> ExportStepRecordsUnreadable? {
        let skipped = malformedStepRecords + outOfContractStepRecords
        guard recordsKept == 0, skipped > 0 else { return nil }
        let first = (malformedExamples + outOfContractExamples).min { $0.line < $1.line }
        return ExportStepRecordsUnreadable(path: path, skipped: skipped,
                                           formatNotSupported: unreadableFieldStepRecords == skipped, first: first)
    }
}
