/// How to open a store.
public struct StoreOptions: Sendable {
    /// Size at which the writer seals a segment and starts the next one.
    public var segmentSize: Int = FormatConstants.defaultSegmentSize
    /// Open without writing anything: no lock held exclusively, no torn tail
    /// truncated, no temporary files removed. Mutations throw `.readOnly`.
    public var readOnly = false
    /// On corruption, keep everything before the damage instead of failing:
    /// the rest is set aside in a file next to the store (read-only: only
    /// not loaded) and reported in `OpenReport.salvage`.
    public var salvage = false
    /// Bytes of appended records buffered before they are written to the file
    /// (without sync). Larger buffers mean fewer system calls; nothing is
    /// durable before `sync()` either way.
    public var writeBufferSize = 1 << 20
    /// Zero-filled, synced space the writer keeps ahead of its write offset in
    /// the newest segment (never past `segmentSize`). Appends then never change
    /// the file's size or block map, so `sync` flushes data only, without a
    /// journal commit (PostgreSQL zero-fills WAL segments for the same
    /// reason). 0 turns it off.
    public var preallocationSize = 8 << 20
    /// Pad the log to a 512-byte sector boundary before each `sync()`, so that
    /// no later write shares a sector with bytes already acknowledged: on a
    /// disk without powersafe overwrite, a torn write can then damage only
    /// unacknowledged bytes (docs/FORMAT.md, "What is assumed of the disk").
    /// Costs half a sector a sync on average.
    public var padSyncsToSector = true
    /// Create the directory when it does not exist (writers only).
    public var createIfMissing = true
    /// Load index snapshots of sealed segments instead of replaying them.
    public var useSnapshots = true
    /// Write an index snapshot for each segment the writer seals.
    public var writeSnapshots = true
    /// A writer compacts in the background (on a low-priority thread, the
    /// store staying in use) once its estimated dead bytes reach both
    /// `compactionDeadBytes` and `compactionDeadFraction` of its segment bytes;
    /// checked when the store opens and each time a segment is sealed.
    /// 0 turns it off (`steplog compact` still compacts).
    public var compactionDeadBytes: Int64 = 256 << 20
    public var compactionDeadFraction = 0.5
    /// Called on the compaction's thread at each step of a compaction the
    /// store runs in the background (`CompactionStep`), before the step's
    /// work goes on: tests and the tools' test knob use it to tell when one
    /// runs (stepsync's `STEPSYNC_TEST_COMPACTION`). Must not use the store.
    public var onBackgroundCompactionStep: (@Sendable (CompactionStep) -> Void)?
    /// Bytes of index per band when applying snapshots (see
    /// `ReplayPipeline.applySnapshots`); tests make it tiny to get many bands.
    var snapshotBandBytes = ReplayPipeline.defaultBandBytes
    /// Snapshot entries from which opening applies them on two threads (see
    /// `SnapshotBandApplier`); tests set 0 to use both threads on small stores.
    var snapshotParallelEntries = SnapshotBandApplier.defaultParallelEntries
    /// Replaces the UUID hash the index files keys by: tests force every key
    /// to share one tag, so that each lookup must read records to tell them apart.
    var indexHash: (@Sendable (UUIDBytes) -> UInt64)?
    /// Stores of at most this many segment bytes are replayed without a
    /// reader thread (see `ReplayPipeline.startReading`); tests set 0 and
    /// `.max` to compare the two.
    var replayInlineBytes = ReplayPipeline.defaultInlineReadBytes

    public init(segmentSize: Int = FormatConstants.defaultSegmentSize, readOnly: Bool = false, salvage: Bool = false,
                createIfMissing: Bool = true) {
        self.segmentSize = segmentSize
        self.readOnly = readOnly
        self.salvage = salvage
        self.createIfMissing = createIfMissing
    }
}
