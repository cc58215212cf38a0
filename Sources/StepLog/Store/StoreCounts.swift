/// Counts the CLIs and the pipeline report.
public struct StoreCounts: Sendable, Equatable {
    /// Live samples (a sample with a pending deletion is not one).
    public var samples: Int
    public var syncedSamples: Int
    /// Live samples waiting for upload (not synced, not rejected).
    public var unsyncedSamples: Int
    /// Live samples whose current version the server rejected: kept, not sent
    /// again until their content changes. samples = synced + unsynced + rejected.
    public var rejectedSamples: Int
    /// Samples deleted at their source whose deletion the server has not
    /// acknowledged yet (tombstones in the index).
    public var pendingDeletions: Int
    public var intervals: [IntervalStatus: Int]
    public var intervalTotal: Int
    public var segments: Int
    public var bytes: Int64
}
