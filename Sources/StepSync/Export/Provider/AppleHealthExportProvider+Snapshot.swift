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

    /// Compares the export with the store's export samples (one pass over
    /// the log, a binary search each): those labeled `.export`, and those a
    /// store written before origins were recorded holds unlabeled — every
    /// unlabeled sample but the mock's (`com.apple.health.mock`), the only
    /// other source there was. A stored sample whose id the export replaced
    /// by a newer derivation (`reidentifiedSamples`) is deleted too. Deleted
    /// samples that are still there in another form (under a newer
    /// derivation's id; a newer sync version the app saved,
    /// `ExportSyncReplacements`; a sample of the same span and count, as
    /// after a device was renamed) are counted in `withReplacement`, not as
    /// losses. A stored sample with an id the export holds but other source
    /// names (an older version's mapping) is left for the fetch to rewrite.
    /// Throws `DeletionRefusal.olderExport`
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
        var compared = 0, withReplacement = 0, bySyncVersion = 0
        let legacy = Set(reidentifiedSamples.lazy.filter { $0.legacyID != $0.id }.map { UUIDBytes($0.legacyID) })
        let syncReplacements = ExportSyncReplacements(provider: self)
        let mockBundle = Array(MockPhoneStream.bundleId.utf8)
        // Samples stored labeled `.export` under an id the export holds: the
        // id is derived from every field of the content, so they are stored
        // exactly as served (one bit per sample).
        var stored = ExportSampleBitSet(count: sampleCount)
        try store.forEachSampleSpan { span in
            switch span.origin {
            case .export: break
            case .unspecified where !span.sourceBundleId.elementsEqual(mockBundle): break
            default: return
            }
            compared += 1
            let id = span.id.uuid
            if let i = recordIndex(id: id, startMilliseconds: span.startMilliseconds) {
                if span.origin == .export, hasSource(at: i, bundleId: span.sourceBundleId, deviceName: span.sourceDeviceName) {
                    stored.insert(i)
                }
                return
            }
            let isLegacy = legacy.contains(span.id)
            guard span.startMilliseconds < exportDate || isLegacy else { return }
            ids.append(id)
            if isLegacy {
                withReplacement += 1
            } else if syncReplacements.replaced(span) {
                withReplacement += 1
                bySyncVersion += 1
            } else if hasSampleWithSameSpanAndCount(startMilliseconds: span.startMilliseconds, endMilliseconds: span.endMilliseconds,
                                                    countThousandths: span.countThousandths) {
                withReplacement += 1
            }
        }
        var deletions = SourceDeletions(ids: ids, anchor: Self.encodeAnchor(exportDate), comparedWith: compared,
                                        withReplacement: withReplacement)
        deletions.replacedBySyncVersion = bySyncVersion
        let known = stored
        deletions.alreadyStored = { [self] sample in
            guard sample.origin == .export, let i = recordIndex(id: sample.id, startMilliseconds: sample.startMilliseconds) else { return false }
            return known.contains(i)
        }
        return deletions
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
