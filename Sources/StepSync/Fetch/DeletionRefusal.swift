import Foundation

/// Why an ingest refuses to apply a source's deletions. Raised before anything
/// is written, so the store is exactly as it was; each case renders as one line.
public enum DeletionRefusal: Error, CustomStringConvertible, Equatable, Sendable {
    /// The export's `ExportDate` is before the one last imported: importing it
    /// would delete what the newer one added.
    case olderExport(path: String, exportDateMilliseconds: Int64, lastImportedMilliseconds: Int64)
    /// A snapshot would delete more than `DeletionService.maxDeletedFraction`
    /// of the stored samples it was compared with, counting only deletions
    /// with no replacement (another person's export, a partial one).
    case tooManyDeletions(source: String, deleting: Int, comparedWith: Int)

    public var description: String {
        switch self {
        case let .olderExport(path, date, last):
            return "\(path): export is older than the last one imported (ExportDate \(ISO8601.format(milliseconds: date)), "
                + "last imported \(ISO8601.format(milliseconds: last))); nothing was stored (--keep-deleted imports it without deletions)"
        case let .tooManyDeletions(source, deleting, comparedWith):
            let percent = comparedWith > 0 ? Double(deleting) * 100 / Double(comparedWith) : 100
            return "\(source): would delete \(deleting) of the \(comparedWith) stored export samples with no replacement ("
                + String(format: "%.1f", percent) + "%, more than 5%); nothing was stored. "
                + "If this export is complete and yours, run again with --allow-deletions"
        }
    }
}
