import StepLog
import StepSync

extension JSONWriter {
    /// A store's counts as the `--json` output of `stepsync status`, `ingest`,
    /// `upload` and `steplog stats` spell them: one place, so the commands
    /// never disagree on a name.
    public mutating func storeCounts(_ counts: StoreCounts) {
        field("samples", counts.samples)
        field("syncedSamples", counts.syncedSamples)
        field("unsyncedSamples", counts.unsyncedSamples)
        field("rejectedSamples", counts.rejectedSamples)
        field("pendingDeletions", counts.pendingDeletions)
        key("intervals"); beginObject()
        for status in IntervalStatus.allCases { field(status.description, counts.intervals[status] ?? 0) }
        endObject()
    }
}
