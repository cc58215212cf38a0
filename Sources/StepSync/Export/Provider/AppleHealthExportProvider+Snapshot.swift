import Foundation
import StepLog

/// An export is a snapshot of the Health store (docs/EXPORT.md, "A newer
/// export"): every stored sample that came from an export, started before
/// this export's `ExportDate` and is absent from it no longer exists.
extension AppleHealthExportProvider {
    /// Every export of every Health store shares one family: the anchor is
    /// the `ExportDate` of the last export imported as a snapshot.
    public static let snapshotFamily = "apple-health-export"

    public var deletionFamily: String? { Self.snapshotFamily }

    /// Compares the export with the store's export-origin samples (one pass
    /// over the log, a binary search each). Throws `DeletionRefusal.olderExport`
    /// when the export is older than the anchor. An export without an
    /// `ExportDate` cannot say what it covers: it deletes nothing and leaves
    /// the anchor as it was.
    public func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions {
        try snapshotDeletions(since: anchor, in: store)
    }

    /// `deletedSamples(since:in:)`, synchronously.
    public func snapshotDeletions(since anchor: [UInt8]?, in store: StepLogStore) throws -> SourceDeletions {
        guard let exportDate = exportDateMilliseconds else { return SourceDeletions(ids: [], anchor: anchor ?? []) }
        if let last = anchor.flatMap(Self.decodeAnchor), exportDate < last {
            throw DeletionRefusal.olderExport(path: path, exportDateMilliseconds: exportDate, lastImportedMilliseconds: last)
        }
        var ids: [UUID] = []
        var compared = 0
        try store.forEachSampleSpan { span in
            guard span.origin == .export else { return }
            compared += 1
            guard span.startMilliseconds < exportDate else { return }
            let id = span.id.uuid
            if !contains(id: id, startMilliseconds: span.startMilliseconds) { ids.append(id) }
        }
        return SourceDeletions(ids: ids, anchor: Self.encodeAnchor(exportDate), comparedWith: compared)
    }

    /// The anchor: the `ExportDate` in milliseconds, 8 bytes little-endian.
    static func encodeAnchor(_ milliseconds: Int64) -> [UInt8] {
        withUnsafeBytes(of: milliseconds.littleEndian) { Array($0) }
    }

    static func decodeAnchor(_ bytes: [UInt8]) -> Int64? {
        guard bytes.count == 8 else { return nil }
        return bytes.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(as: Int64.self)) }
    }
}
