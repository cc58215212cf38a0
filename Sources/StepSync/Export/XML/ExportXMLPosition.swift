/// Where something is in an export's XML: the 1-based line, and the byte
/// offset from the XML's first byte (for a zip, of the inflated entry).
public struct ExportXMLPosition: Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var offset: Int64

    public init(line: Int, offset: Int64) {
        self.line = line
        self.offset = offset
    }

    /// "line 12 (byte offset 3456)".
    public var description: String { "line \(line) (byte offset \(offset))" }
}
