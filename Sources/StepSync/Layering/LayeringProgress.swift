/// Where layering is, for progress lines.
public struct LayeringProgress: Sendable {
    /// Leaves (intervals) known so far: recorded before this run plus found in it.
    public var intervalsFound: Int
    /// Aggregate queries asked in this run.
    public var queries: Int
    /// Share of the data range already layered (by time), 0…1.
    public var fractionDone: Double
    public var status: String
}

/// What a layering run did.
public struct LayeringSummary: Sendable, Equatable {
    /// Intervals recorded by this run.
    public var intervalsRecorded = 0
    /// Intervals that were already recorded and kept (a resumed run).
    public var intervalsKept = 0
    public var queries = 0
    /// The store's intervals came from another source and were cleared first.
    public var sourceChanged = false
    public var seconds = 0.0
}
