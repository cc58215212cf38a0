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
}
