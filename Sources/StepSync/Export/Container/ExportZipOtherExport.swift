/// An Apple Health export a zip holds besides the one that was read (two
/// exports zipped together): named in the read's summary, never silently
/// passed over.
public struct ExportZipOtherExport: Sendable, Equatable {
    /// The entry's name in the zip.
    public var entry: String
    /// Its `<ExportDate>`, nil when it has none that can be read.
    public var exportDateMilliseconds: Int64?
    /// Its size, uncompressed.
    public var bytes: Int64

    public init(entry: String, exportDateMilliseconds: Int64?, bytes: Int64) {
        self.entry = entry
        self.exportDateMilliseconds = exportDateMilliseconds
        self.bytes = bytes
    }
}
