import Foundation

/// Everything the log means, in memory: the sample index with its counters,
/// the intervals, the daily high scores, the source anchors, the rejections.
/// Built by applying records in log order: `replay` is the one place that
/// says what each record type does (a `RecordView` handler), and the writers
/// change the state through the same methods it calls.
///
/// The index holds every UUID that is live or has a pending deletion; an
/// acknowledged deletion removes the UUID.
public final class StoreState {
    public let index: SampleIndex
    /// Live samples whose current version the server has not acknowledged.
    public internal(set) var unsyncedCount: Int {
        get { counters.pointee.unsynced }
        set { counters.pointee.unsynced = newValue }
    }
    /// Tombstones in the index: deletions the server has not acknowledged.
    public internal(set) var pendingDeletionCount: Int {
        get { counters.pointee.pendingDeletions }
        set { counters.pointee.pendingDeletions = newValue }
    }
    /// Live samples by the origin of their current version.
    public var samplesByOrigin: SampleOriginCounts { counters.pointee.liveByOrigin }
    /// The counters every sample version changes, kept behind a pointer the
    /// state owns: as stored properties of the class, each access paid a
    /// dynamic exclusivity check. (A thread filling a lane of the index keeps
    /// its own: `StoreState+Lanes.swift`.)
    struct Counters {
        var unsynced = 0, pendingDeletions = 0
        var liveByOrigin = SampleOriginCounts()

        /// `new` replaced `old` (nil: the UUID was absent) as a UUID's entry.
        @inline(__always)
        mutating func replace(_ old: IndexEntry?, with new: IndexEntry) {
            if let old { remove(old) }
            if new.isTombstone {
                pendingDeletions += 1
            } else {
                if !new.isSynced { unsynced += 1 }
                liveByOrigin.add(1, code: new.originCode)
            }
        }

        /// `old` left the index.
        @inline(__always)
        mutating func remove(_ old: IndexEntry) {
            if old.isTombstone {
                pendingDeletions -= 1
            } else {
                if !old.isSynced { unsynced -= 1 }
                liveByOrigin.add(-1, code: old.originCode)
            }
        }
    }
    let counters: UnsafeMutablePointer<Counters> = {
        let p = UnsafeMutablePointer<Counters>.allocate(capacity: 1)
        p.initialize(to: Counters())
        return p
    }()
    public internal(set) var intervals = IntervalTable()
    public internal(set) var highScores: [UInt32: DailyHighScore] = [:]
    /// Position of the record that set each day's high score.
    var highScorePositions: [UInt32: LogPosition] = [:]
    /// The latest anchor per source family (FNV-1a 64 of the family's name),
    /// with the position of the record that set it.
    public internal(set) var anchors: [UInt64: (anchor: [UInt8], position: LogPosition)] = [:]
    /// The latest rejection recorded per UUID, with the position of its
    /// `samplesRejected` record. It applies while the sample's current version
    /// is live, unsynced and older than that record (`isRejectionCurrent`).
    var rejections: [UUIDBytes: (rejection: SampleRejection, position: LogPosition)] = [:]
    /// The latest destination record of each destination (server id, user),
    /// with its position; `destination` is the latest of all: the current one.
    var destinations: [DestinationKey: (destination: StoreDestination, position: LogPosition)] = [:]
    public internal(set) var destination: StoreDestination?
    struct DestinationKey: Hashable {
        var serverId: String
        var user: String
        init(_ d: StoreDestination) { (serverId, user) = (d.serverId, d.user) }
    }
    /// Positions below this hold no unsynced current version (a lower bound the
    /// unsynced scan raises as it goes).
    var unsyncedFloor = LogPosition.zero
    /// Positions below this hold no pending tombstone (raised like `unsyncedFloor`).
    var deletionFloor = LogPosition.zero

    /// `indexHash` replaces the UUID hash the index files keys by (tests force
    /// tag collisions with it). The index confirms tag matches with `keyAt`,
    /// which the state's owner sets.
    public init(indexHash: ((UUIDBytes) -> UInt64)? = nil) { index = SampleIndex(hash: indexHash) }

    deinit {
        counters.deinitialize(count: 1)
        counters.deallocate()
    }

    /// Live samples (the index less its tombstones).
    public var sampleCount: Int { index.count - pendingDeletionCount }
    public var syncedCount: Int { sampleCount - unsyncedCount }

    // MARK: Replay

    /// Sample versions and tombstones replayed but not yet applied: replay
    /// prefetches each one's index slot and applies them in groups, so the
    /// cache misses overlap. Any other record, and `finishReplay`, applies
    /// them first.
    private var queuedKeys: [UUIDBytes] = []
    private var queuedEntries: [IndexEntry] = []
    static let replayGroup = 32

    /// Applies one record found at `position`, in log order: what each record
    /// type means. Call `finishReplay` after the last record.
    @inline(__always)
    public func replay(_ record: RecordView, at position: LogPosition) throws {
        switch record {
        case .sampleUpsert(let sample):
            try queue(sample.uuid, IndexEntry(version: sample, at: position))
        case .sampleDeleted(let tombstone):
            try queue(tombstone.uuid, .tombstone(at: position))
        case .samplesAcknowledged(let ids):
            try applyQueued()
            try applyAcknowledged(ids)
        case .intervalStatus(let p):
            try applyQueued()
            intervals.apply(p.interval, at: position)
        case .intervalsCleared:
            try applyQueued()
            intervals.clear()
        case .layeringRange(let p):
            try applyQueued()
            intervals.applyRange(p.range, at: position)
        case .dailyHighScore(let p):
            try applyQueued()
            setHighScore(p.score, at: position)
        case .sourceAnchor(let p):
            try applyQueued()
            anchors[p.family] = (Array(p.anchor), position)
        case .samplesRejected(let p):
            try applyQueued()
            recordRejections(p.rejections, at: position)
        case .destination(let p):
            try applyQueued()
            setDestination(p.destination, at: position)
        case .samplesUnacknowledged(let p):
            try applyQueued()
            try applyUnacknowledged(p.rejections, at: position)
        case .syncedThrough, .padding:
            break // they say what is durable, not what the log means
        }
    }

    /// Decodes and applies one checksummed record (`replay`); returns the
    /// problem when it is not a record of its type.
    public func replay(type: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) throws -> PayloadProblem? {
        switch RecordView.decode(type: type, payload: payload) {
        case .success(let record):
            try replay(record, at: position)
            return nil
        case .failure(let problem):
            return problem
        }
    }

    @inline(__always)
    private func queue(_ key: UUIDBytes, _ entry: IndexEntry) throws {
        index.prefetch(key)
        queuedKeys.append(key)
        queuedEntries.append(entry)
        if queuedKeys.count == Self.replayGroup { try applyQueued() }
    }

    /// Applies sample versions still queued by `replay`.
    public func finishReplay() throws { try applyQueued() }

    @inline(__always)
    private func applyQueued() throws {
        guard !queuedKeys.isEmpty else { return }
        defer {
            queuedKeys.removeAll(keepingCapacity: true)
            queuedEntries.removeAll(keepingCapacity: true)
        }
        for i in 0..<queuedKeys.count { try applyVersion(queuedKeys[i], queuedEntries[i]) }
    }

    /// Applies every UUID of a `samplesAcknowledged` record, a group at a
    /// time with their slots prefetched.
    func applyAcknowledged(_ ids: AcknowledgedPayload) throws {
        var i = 0
        while i < ids.count {
            let end = min(ids.count, i + Self.replayGroup)
            for j in i..<end { index.prefetch(ids.uuid(j)) }
            for j in i..<end { try applyAcknowledged(ids.uuid(j)) }
            i = end
        }
    }

    // MARK: What records do (replay and the writers)

    /// Makes `entry` (a sample version or a tombstone) the current version of
    /// `id`, keeping the counters: the hot path of replay and upsert.
    @inline(__always)
    func applyVersion(_ id: UUIDBytes, _ entry: IndexEntry) throws {
        let old = try index.set(id, entry)
        counters.pointee.replace(old, with: entry)
    }

    /// Acknowledges the current version of `id` (one UUID of a
    /// `samplesAcknowledged` record): a live version becomes synced; a
    /// tombstone is done and the UUID leaves the index. Absent: nothing.
    @inline(__always)
    func applyAcknowledged(_ id: UUIDBytes) throws {
        guard let entry = try index.find(id) else { return }
        try acknowledge(id, entry)
    }

    /// `applyAcknowledged` of the version of `id` at `position` (read by the
    /// caller), which needs no read to confirm the index's entry.
    func applyAcknowledged(_ id: UUIDBytes, versionAt position: LogPosition) throws {
        guard let entry = index.entry(id, at: position) else { return }
        try acknowledge(id, entry)
    }

    @inline(__always)
    private func acknowledge(_ id: UUIDBytes, _ entry: IndexEntry) throws {
        switch entry.acknowledgement {
        case .removal:
            try index.remove(id)
            counters.pointee.pendingDeletions -= 1
        case .syncing:
            try index.update(id) { $0.withSynced(true) }
            counters.pointee.unsynced -= 1
        case .none:
            break
        }
    }

    /// Removes `id` whatever its state (a snapshot entry saying the UUID is
    /// absent after its segment).
    func applyRemoved(_ id: UUIDBytes) throws {
        guard let old = try index.remove(id) else { return }
        counters.pointee.remove(old)
    }

    func setHighScore(_ score: DailyHighScore, at position: LogPosition) {
        highScores[score.day] = score
        highScorePositions[score.day] = position
    }

    func recordRejections(_ list: [SampleRejection], at position: LogPosition) {
        for r in list { rejections[UUIDBytes(r.id)] = (r, position) }
    }

    func setDestination(_ d: StoreDestination, at position: LogPosition) {
        destinations[DestinationKey(d)] = (d, position)
        destination = d
    }

    /// One `samplesUnacknowledged` record: each entry's current version, when
    /// it is a live sample, is unsynced again; an entry with a reason records
    /// a rejection (at `position`, so it applies to that version), one without
    /// ends any rejection the sample had.
    func applyUnacknowledged(_ entries: [SampleRejection], at position: LogPosition) throws {
        for e in entries {
            let key = UUIDBytes(e.id)
            try applyUnacknowledged(key)
            if e.reason.isEmpty {
                rejections.removeValue(forKey: key)
            } else {
                rejections[key] = (e, position)
            }
        }
    }

    /// Unsyncs the current version of `id` when it is a synced live sample
    /// (and lowers the unsynced scan's floor to it: it may lie below).
    @inline(__always)
    func applyUnacknowledged(_ id: UUIDBytes) throws {
        guard let entry = try index.find(id), !entry.isTombstone, entry.isSynced else { return }
        try index.update(id) { $0.withSynced(false) }
        counters.pointee.unsynced += 1
        unsyncedFloor = min(unsyncedFloor, entry.position)
    }

    // MARK: Rejections

    /// True when the rejection recorded at `position` for `id` is the latest
    /// for it and still applies: the sample's current version is live,
    /// unsynced, and written before the rejection (the version it rejected; a
    /// newer version, a deletion or a revival ends it).
    @inline(__always)
    func isRejectionCurrent(_ id: UUIDBytes, recordedAt position: LogPosition) throws -> Bool {
        guard rejections[id]?.position == position, let entry = try index.find(id) else { return false }
        return entry.isUnsyncedLive && entry.position < position
    }

    /// True when the current version of `id`, at `versionPosition`, is rejected.
    @inline(__always)
    func isRejected(_ id: UUIDBytes, versionAt versionPosition: LogPosition) throws -> Bool {
        guard !rejections.isEmpty, let r = rejections[id] else { return false }
        return try versionPosition < r.position && isRejectionCurrent(id, recordedAt: r.position)
    }

    /// Live samples whose current version is rejected.
    func rejectedCount() throws -> Int {
        try rejections.reduce(0) { $0 + (try isRejectionCurrent($1.key, recordedAt: $1.value.position) ? 1 : 0) }
    }
}

extension IndexEntry {
    /// The index entry of the sample version `sample`, found at `position`.
    @inline(__always)
    init(version sample: SamplePayload, at position: LogPosition) {
        self.init(position: position, synced: sample.isSynced, origin: sample.origin)
    }

    /// What acknowledging this entry does.
    enum Acknowledgement { case removal, syncing, none }

    /// A tombstone's acknowledgement removes the UUID; a live unsynced
    /// version's makes it synced; a synced one's does nothing.
    @inline(__always)
    var acknowledgement: Acknowledgement {
        if isTombstone { return .removal }
        return isSynced ? .none : .syncing
    }
}
