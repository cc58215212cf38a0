/// How far reading an export has come; handed to the `progress` callback of
/// `AppleHealthExportProvider.init` at most every 0.25 s, and once at the end.
public struct ExportReadProgress: Sendable, Equatable {
    /// Bytes of the input file consumed so far (compressed bytes for a zip).
    public var bytesRead: Int64
    /// Size of the input file: `bytesRead / totalBytes` is the fraction done
    /// (for a zip this ignores the other entries, so it may end below 1).
    public var totalBytes: Int64
    /// Bytes of XML produced so far (inflated bytes for a zip).
    public var xmlBytes: Int64
    /// Step records kept so far (before duplicates are collapsed).
    public var stepRecordsKept: Int

    public init(bytesRead: Int64, totalBytes: Int64, xmlBytes: Int64, stepRecordsKept: Int) {
        self.bytesRead = bytesRead
        self.totalBytes = totalBytes
        self.xmlBytes = xmlBytes
        self.stepRecordsKept = stepRecordsKept
    }
}
