import Foundation

/// A sample version as written in a `sampleUpsert` record.
public struct SampleRecord: Hashable, Sendable {
    public var sample: StepSample
    public var fetchedAtMilliseconds: Int64
    /// Written by compaction, which folds the acknowledgement into the version,
    /// and by an upsert that only relabels the origin (it keeps the synced state).
    public var isSynced: Bool

    public init(sample: StepSample, fetchedAtMilliseconds: Int64, isSynced: Bool = false) {
        self.sample = sample
        self.fetchedAtMilliseconds = fetchedAtMilliseconds
        self.isSynced = isSynced
    }
}
