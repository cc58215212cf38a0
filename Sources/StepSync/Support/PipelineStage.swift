import StepLog

/// Where a store stands in the pipeline.
public enum PipelineStage: String, Sendable {
    case notStarted = "not started"
    case layering
    case fetching
    case uploading
    case synced

    public static func of(_ store: StepLogStore) -> PipelineStage {
        let counts = store.counts
        let ranges = store.layeringRanges
        if ranges.isEmpty && counts.intervalTotal == 0 {
            return counts.unsyncedSamples > 0 ? .uploading : (counts.samples > 0 ? .synced : .notStarted)
        }
        let covered = store.intervals().reduce(Int64(0)) { $0 + $1.endMilliseconds - $1.startMilliseconds }
        let wanted = ranges.reduce(Int64(0)) { $0 + $1.endMilliseconds - $1.startMilliseconds }
        if covered < wanted { return .layering }
        if (counts.intervals[.pending] ?? 0) > 0 { return .fetching }
        if counts.unsyncedSamples > 0 { return .uploading }
        return .synced
    }
}
