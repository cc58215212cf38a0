/// Sizes of a store, split into what is live and what compaction would drop.
public struct StoreFigures: Sendable, Equatable {
    public init() {}
    public var segments = 0
    /// Bytes of every segment file (headers included).
    public var bytes: Int64 = 0
    /// Bytes of live records (with their 9-byte frames).
    public var liveBytes: Int64 = 0
    /// Bytes of segment headers (a version 2 header block is 4 KiB).
    public var headerBytes: Int64 = 0
    /// Bytes of synced-through and padding records: the format's durability
    /// marks, apart from dead records.
    public var syncMarkBytes: Int64 = 0
    public var records = 0
    public var liveRecords = 0
    /// The same counts for each record type.
    public var byType: [RecordType: TypeFigures] = [:]

    public struct TypeFigures: Sendable, Equatable {
        public var records = 0
        public var liveRecords = 0
        public var bytes: Int64 = 0
        public var liveBytes: Int64 = 0
        public init() {}
    }

    /// Bytes of dead records: what compaction reclaims (besides sync marks).
    public var deadBytes: Int64 { bytes - liveBytes - headerBytes - syncMarkBytes }
}

/// What a compaction did.
public struct CompactionReport: Sendable, Equatable {
    public var before = StoreFigures()
    public var after = StoreFigures()
    public var seconds = 0.0
    /// Input bytes read, for the MB/s figure.
    public var bytesRead: Int64 = 0
    /// A compaction in the background: how long the switch held the store's
    /// mutex (replaying the last records appended, taking the new state).
    public var switchSeconds = 0.0
}

/// The file operations of a compaction, in order: a test (or a crash) can
/// stop it after any of them. Opening the store afterwards finishes or
/// discards the compaction; the live contents are the same either way.
public enum CompactionStep: Sendable, Equatable, CustomStringConvertible {
    /// The input was flushed; no compaction file exists yet.
    case started
    /// Output segment `n` (0-based) is written and synced under its temporary
    /// name (with its index snapshot, unless it is the last).
    case outputWritten(Int)
    /// Output segment `n` (not the last) was renamed to its final name.
    case outputRenamed(Int)
    /// The last output's header now carries the "final" flag, synced (still temporary).
    case finalHeaderWritten
    /// The last output was renamed into place and the directory synced: committed.
    case committed
    /// Input segment `n` was deleted.
    case inputRemoved(Int)
    /// Nothing is left to do.
    case finished

    public var description: String {
        switch self {
        case .started: "started"
        case .outputWritten(let n): "output \(n) written"
        case .outputRenamed(let n): "output \(n) renamed"
        case .finalHeaderWritten: "final header written"
        case .committed: "committed"
        case .inputRemoved(let n): "input \(n) removed"
        case .finished: "finished"
        }
    }
}
