import StepLog

/// What tells a stored sample an app re-saved with a higher
/// `HKMetadataKeySyncVersion` from one that really disappeared, when a newer
/// export no longer holds it (docs/EXPORT.md, "Sync identifiers"):
///
/// - its id is among the export's own replaced versions (the export still
///   prints the older version beside the newer one): exact;
/// - or the export holds a current sample of the same `sourceName` that
///   carries a sync identifier with an integer version and shares an instant
///   with it (or starts when it starts). The store keeps no metadata, so the
///   identifier itself cannot be compared; an app re-saving a sample keeps
///   its time.
struct ExportSyncReplacements {
    private let replacedIDs: Set<UUIDBytes>
    /// The current synced samples, sorted by start.
    private let spans: [(start: Int64, end: Int64, sourceName: [UInt8])]
    private let longest: Int64

    init(provider: AppleHealthExportProvider) {
        replacedIDs = Set(provider.replacedRecords.map { UUIDBytes($0.id) })
        var spans: [(start: Int64, end: Int64, sourceName: [UInt8])] = []
        for record in provider.syncedRecords where record.syncVersion != nil {
            guard let i = provider.recordIndex(id: record.id, startMilliseconds: record.startMilliseconds) else { continue }
            spans.append((record.startMilliseconds, provider.endMilliseconds(at: i), Array(record.sourceName.utf8)))
        }
        spans.sort { $0.start < $1.start }
        self.spans = spans
        longest = spans.map { $0.end - $0.start }.max() ?? 0
    }

    /// Whether the stored sample (absent from the export) was replaced by a newer sync version.
    func replaced(_ span: SampleSpan) -> Bool {
        if replacedIDs.contains(span.id) { return true }
        var low = 0, high = spans.count
        let from = span.startMilliseconds - longest
        while low < high {
            let mid = (low + high) / 2
            if spans[mid].start < from { low = mid + 1 } else { high = mid }
        }
        var i = low
        while i < spans.count, spans[i].start <= span.endMilliseconds {
            let other = spans[i]
            let shares = other.start == span.startMilliseconds
                || max(other.start, span.startMilliseconds) < min(other.end, span.endMilliseconds)
            if shares, span.sourceBundleId.elementsEqual(other.sourceName) { return true }
            i += 1
        }
        return false
    }
}
