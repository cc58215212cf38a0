/// Counts the CLIs and the pipeline report.
public struct StoreCounts: Sendable, Equatable {
    public var samples: Int
    public var syncedSamples: Int
    public var unsyncedSamples: Int
    public var intervals: [IntervalStatus: Int]
    public var intervalTotal: Int
    public var segments: Int
    public var bytes: Int64
}
