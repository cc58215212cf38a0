/// A step record that was skipped — it cannot be a sample, or it breaks the
/// sample contract: where it is and why, for the import summary.
public struct ExportSkippedRecord: Sendable, Equatable, CustomStringConvertible {
    /// Line of the XML on which the record's start tag begins (1-based).
    public var line: Int
    /// One short phrase: "missing startDate", "value \"12.5\" is not a whole number",
    /// "count 2000000 is outside 0…1000000", …
    public var reason: String
    /// For a record outside the sample contract: the field it breaks.
    public var field: SampleContract.Field?

    public init(line: Int, reason: String, field: SampleContract.Field? = nil) {
        self.line = line
        self.reason = reason
        self.field = field
    }

    public var description: String { "line \(line): \(reason)" }
}
