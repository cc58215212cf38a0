/// A step record that was skipped because it cannot be a sample: where it is
/// and why, for the import summary.
public struct ExportSkippedRecord: Sendable, Equatable, CustomStringConvertible {
    /// Line of the XML on which the record's start tag begins (1-based).
    public var line: Int
    /// One short phrase: "missing startDate", "value \"12.5\" is not a whole number", …
    public var reason: String

    public init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }

    public var description: String { "line \(line): \(reason)" }
}
