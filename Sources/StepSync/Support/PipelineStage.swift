import StepLog

/// Where a store stands in the pipeline.
public enum PipelineStage: String, Sendable {
    case notStarted = "not started"
    case layering
    case fetching
    /// Samples or deletions wait for upload and none was ever acknowledged
    /// (nothing in the store is synced yet).
    case readyToUpload = "ready to upload"
    /// Samples or deletions wait for upload and some were acknowledged before.
    case uploading
    case synced

    public static func of(_ store: StepLogStore) -> PipelineStage {
        let counts = store.counts
        let ranges = store.layeringRanges
        let waiting = counts.unsyncedSamples > 0 || counts.pendingDeletions > 0
        // Acknowledged deletions leave nothing behind, so "some upload was
        // acknowledged" is read from synced samples and synced intervals.
        let uploadStarted = counts.syncedSamples > 0 || (counts.intervals[.synced] ?? 0) > 0
        let toUpload: PipelineStage = uploadStarted ? .uploading : .readyToUpload
        if ranges.isEmpty && counts.intervalTotal == 0 {
            return waiting ? toUpload : (counts.samples > 0 ? .synced : .notStarted)
        }
        let covered = store.intervals().reduce(Int64(0)) { $0 + $1.endMilliseconds - $1.startMilliseconds }
        let wanted = ranges.reduce(Int64(0)) { $0 + $1.endMilliseconds - $1.startMilliseconds }
        if covered < wanted { return .layering }
        if (counts.intervals[.pending] ?? 0) > 0 { return .fetching }
        if waiting { return toUpload }
        return .synced
    }
}
