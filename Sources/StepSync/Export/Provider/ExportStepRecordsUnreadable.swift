/// An export whose every step record was skipped: an import of it stores
/// nothing and says why, in one line (`stepsync ingest` exits 1).
public struct ExportStepRecordsUnreadable: Error, CustomStringConvertible, Equatable, Sendable {
    public var path: String
    /// Step records skipped: all there were.
    public var skipped: Int
    /// Every one had a missing or unreadable date or source name, or a broken
    /// tag: the export is in a format this reader does not know.
    public var formatNotSupported: Bool
    /// The first one skipped (by line), with its reason.
    public var first: ExportSkippedRecord?

    public var description: String {
        let records = "\(skipped) step \(skipped == 1 ? "record" : "records")"
        let example = first.map { "\($0.reason) (line \($0.line))" } ?? "no reason recorded"
        if formatNotSupported {
            return "\(path): none of its \(records) could be read: this export's format is not supported: \(example); nothing was stored"
        }
        return "\(path): every one of its \(records) was skipped, the first for: \(example); nothing was stored"
    }
}
