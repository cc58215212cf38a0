/// Counts the CLIs and the pipeline report.
public struct StoreCounts: Sendable, Equatable {
    /// Live samples (a sample with a pending deletion is not one).
    public var samples: Int
    public var syncedSamples: Int
    public var unsyncedSamples: Int
    /// Samples deleted at their source whose deletion the server has not
    /// acknowledged yet (tombstones in the index).
    public var pendingDeletions: Int
    public var intervals: [IntervalStatus: Int]
    public var intervalTotal: Int
    public var segments: Int
    public var bytes: Int64
}
