/// What opening a store found and did.
public struct OpenReport: Sendable, Equatable {
    /// Bytes at the end of the newest segment that no sync acknowledged (a
    /// writer died mid-append, or a power loss tore unsynced writes), removed.
    public struct TornTail: Sendable, Equatable {
        public var segment: String
        public var offset: Int64
        public var bytesDropped: Int64
    }

    /// Damage kept out by `StoreOptions.salvage`.
    public struct Salvage: Sendable, Equatable {
        public var segment: String
        public var offset: Int64
        public var reason: String
        /// Bytes after the damage, in that segment and every later one.
        public var bytesDropped: Int64
        /// Segments after the damaged one that were dropped whole.
        public var segmentsDropped: Int
        /// Where the dropped bytes were set aside (nil when opened read-only).
        public var setAsidePath: String?
    }

    public var segments = 0
    public var records = 0
    public var bytesReplayed: Int64 = 0
    /// Sealed segments whose index snapshot was loaded instead of replaying them.
    public var segmentsFromSnapshots = 0
    /// Snapshot entries two threads applied at once, each in its half of the
    /// index (a large store; see `SnapshotBandApplier`).
    public var snapshotEntriesInParallel = 0
    /// Times one of those threads left the rest of its half to the opening
    /// thread (a probe run reaching the other half: rare but allowed).
    public var snapshotLaneRefusals = 0
    /// Snapshots found damaged or stale and ignored (their segments were replayed).
    public var snapshotsIgnored: [String] = []
    public var tornTail: TornTail?
    public var salvage: Salvage?
    public var removedTemporaryFiles: [String] = []
    /// Segments removed because a committed compaction had replaced them.
    public var compactionFinished: [String] = []
    /// Outputs of a compaction that never committed, removed.
    public var compactionDiscarded: [String] = []
    /// A newest segment whose creation was cut short (no complete header), removed.
    public var incompleteSegmentRemoved: String?
    /// A writer found the newest segment in an older format version: it was
    /// sealed as it is and writing continues in a new segment (its name).
    public var sealedOlderVersion: String?
    public var seconds: Double = 0
}
