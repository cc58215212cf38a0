import Foundation

/// Everything the log means, in memory: the sample index with its counters,
/// the intervals, the daily high scores, the source anchors. Built by applying
/// records in log order; the one place that says what each record type does.
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
    /// The two counters every sample version changes. The state's own are
    /// behind a pointer it owns: as stored properties of the class, each
    /// access paid a dynamic exclusivity check, a fifth of opening's CPU at
    /// 100M samples. A thread filling a lane of the index keeps its own
    /// (changes to add with `absorb`).
    struct Counters { var unsynced = 0, pendingDeletions = 0 }
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

    /// Sample versions and tombstones read by replay but not yet applied:
    /// replay prefetches each one's index slot and applies them in groups, so
    /// the cache misses overlap. Any other record, and `finishReplay`, applies
    /// them first.
    private var queuedKeys: [UUIDBytes] = []
    private var queuedEntries: [IndexEntry] = []
    static let replayGroup = 32

    /// Applies one checksummed record found at `position` during replay.
    /// Returns a problem when the type is undefined or the payload does not
    /// have its type's shape (corruption). Call `finishReplay` after the last record.
    @inline(__always)
    public func replay(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) throws -> PayloadProblem? {
        if rawType == RecordType.sampleUpsert.rawValue {
            guard SamplePayload.isWellFormed(payload) else {
                return SamplePayload.problem(payload)
            }
            try queue(SamplePayload.uuid(payload), IndexEntry(position: position,
                                                          synced: SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0))
            return nil
        }
        if rawType == RecordType.sampleDeleted.rawValue {
            guard TombstonePayload.isWellFormed(payload) else { return TombstonePayload.problem(payload) }
            try queue(TombstonePayload.uuid(payload), .tombstone(at: position))
            return nil
        }
        try applyQueued()
        if rawType == RecordType.samplesAcknowledged.rawValue {
            guard let n = AcknowledgedPayload.count(payload) else { return AcknowledgedPayload.problem(payload) }
            try applyAcknowledged(payload, count: n)
            return nil
        }
        switch LogRecord.decode(type: rawType, payload: payload) {
        case .failure(let problem):
            return problem
        case .success(let record):
            try apply(record, at: position)
            return nil
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

    /// Applies every UUID of a well-formed `samplesAcknowledged` payload, a
    /// group at a time with their slots prefetched.
    func applyAcknowledged(_ payload: UnsafeRawBufferPointer, count n: Int) throws {
        var i = 0
        while i < n {
            let end = min(n, i + Self.replayGroup)
            for j in i..<end { index.prefetch(AcknowledgedPayload.uuid(payload, j)) }
            for j in i..<end { try applyAcknowledged(AcknowledgedPayload.uuid(payload, j)) }
            i = end
        }
    }

    /// Applies a decoded record (the slow path, for everything but samples).
    public func apply(_ record: LogRecord, at position: LogPosition) throws {
        switch record {
        case .sampleUpsert(let r):
            try applyVersion(UUIDBytes(r.sample.id), IndexEntry(position: position, synced: r.isSynced))
        case .samplesAcknowledged(let ids):
            for id in ids { try applyAcknowledged(UUIDBytes(id)) }
        case .sampleDeleted(let id, _):
            try applyVersion(UUIDBytes(id), .tombstone(at: position))
        case .intervalStatus(let interval):
            intervals.apply(interval, at: position)
        case .intervalsCleared:
            intervals.clear()
        case .layeringRange(let range):
            intervals.applyRange(range, at: position)
        case .dailyHighScore(let score):
            highScores[score.day] = score
            highScorePositions[score.day] = position
        case .sourceAnchor(let family, let anchor):
            anchors[family] = (anchor, position)
        case .samplesRejected(let list):
            for r in list { rejections[UUIDBytes(r.id)] = (r, position) }
        case .syncedThrough, .padding:
            break // they say what is durable, not what the log means
        }
    }

    /// Makes `entry` (a sample version or a tombstone) the current version of
    /// `id`, keeping the counters: the hot path of replay and upsert.
    @inline(__always)
    func applyVersion(_ id: UUIDBytes, _ entry: IndexEntry) throws {
        try applyVersion(id, entry, in: index.ownLane, mixedHash: id.mixedHash, counting: counters)
    }

    /// `applyVersion` on a lane of the index, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyVersion(_ id: UUIDBytes, _ entry: IndexEntry, in lane: SampleIndex.Lane, mixedHash: UInt64,
                      counting c: UnsafeMutablePointer<Counters>) throws {
        let old = try index.set(id, entry, in: lane, mixedHash: mixedHash)
        var unsynced = c.pointee.unsynced, pending = c.pointee.pendingDeletions
        if let old {
            if old.isUnsyncedLive { unsynced -= 1 }
            if old.isTombstone { pending -= 1 }
        }
        if entry.isUnsyncedLive { unsynced += 1 }
        if entry.isTombstone { pending += 1 }
        c.pointee.unsynced = unsynced
        c.pointee.pendingDeletions = pending
    }

    /// Adds what a lane's thread counted (`applyVersion(_:_:in:counting:)`).
    func absorb(_ c: Counters) {
        counters.pointee.unsynced += c.unsynced
        counters.pointee.pendingDeletions += c.pendingDeletions
    }

    /// A sample version (`applyVersion` of a non-tombstone).
    @inline(__always)
    func applySampleVersion(_ id: UUIDBytes, position: LogPosition, synced: Bool) throws {
        try applyVersion(id, IndexEntry(position: position, synced: synced))
    }

    /// Acknowledges the current version of `id` (one UUID of a
    /// `samplesAcknowledged` record): a live version becomes synced; a
    /// tombstone is done and the UUID leaves the index. Absent: nothing.
    @inline(__always)
    func applyAcknowledged(_ id: UUIDBytes) throws {
        try applyAcknowledged(id, in: index.ownLane, mixedHash: id.mixedHash, counting: counters)
    }

    /// `applyAcknowledged` on a lane of the index, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyAcknowledged(_ id: UUIDBytes, in lane: SampleIndex.Lane, mixedHash: UInt64,
                           counting c: UnsafeMutablePointer<Counters>) throws {
        guard let entry = try index.find(id, in: lane, mixedHash: mixedHash) else { return }
        try acknowledge(id, entry, in: lane, mixedHash: mixedHash, counting: c)
    }

    /// `applyAcknowledged` of the version of `id` at `position` (read by the
    /// caller), which needs no read to confirm the index's entry.
    func applyAcknowledged(_ id: UUIDBytes, versionAt position: LogPosition) throws {
        guard let entry = index.entry(id, at: position) else { return }
        try acknowledge(id, entry, in: index.ownLane, mixedHash: id.mixedHash, counting: counters)
    }

    @inline(__always)
    private func acknowledge(_ id: UUIDBytes, _ entry: IndexEntry, in lane: SampleIndex.Lane, mixedHash: UInt64,
                             counting c: UnsafeMutablePointer<Counters>) throws {
        if entry.isTombstone {
            try index.remove(id, in: lane, mixedHash: mixedHash)
            c.pointee.pendingDeletions -= 1
        } else if !entry.isSynced {
            try index.update(id, in: lane, mixedHash: mixedHash) { $0.withSynced(true) }
            c.pointee.unsynced -= 1
        }
    }

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

    /// The size a `samplesRejected` payload has once the entries that no
    /// longer apply are left out (what compaction writes).
    func liveRejectionPayloadSize(_ payload: UnsafeRawBufferPointer, at position: LogPosition) throws -> Int {
        guard case .success(let list) = RejectionPayload.decode(payload) else { return 0 }
        return try list.filter { try isRejectionCurrent(UUIDBytes($0.id), recordedAt: position) }
            .reduce(4) { $0 + 16 + 8 + 2 + RejectionPayload.clipped($1.reason).utf8.count }
    }

    /// Live samples whose current version is rejected.
    func rejectedCount() throws -> Int {
        try rejections.reduce(0) { $0 + (try isRejectionCurrent($1.key, recordedAt: $1.value.position) ? 1 : 0) }
    }

    /// Removes `id` whatever its state (a snapshot entry saying the UUID is
    /// absent after its segment).
    func applyRemoved(_ id: UUIDBytes) throws {
        try applyRemoved(id, in: index.ownLane, mixedHash: id.mixedHash, counting: counters)
    }

    /// `applyRemoved` on a lane of the index, given the UUID's `mixedHash`, counting into `c`.
    func applyRemoved(_ id: UUIDBytes, in lane: SampleIndex.Lane, mixedHash: UInt64, counting c: UnsafeMutablePointer<Counters>) throws {
        guard let old = try index.remove(id, in: lane, mixedHash: mixedHash) else { return }
        if old.isUnsyncedLive { c.pointee.unsynced -= 1 }
        if old.isTombstone { c.pointee.pendingDeletions -= 1 }
    }
}

extension StoreState {
    /// True when the record at `position` still means something: the current
    /// version of a sample, a pending tombstone, the latest status of a current
    /// interval, a current layering range, the latest high score of a day, the
    /// latest anchor of a source family, a rejection that still applies (a
    /// `samplesRejected` record is live when one of its entries is). Everything else (older versions,
    /// acknowledgements, acknowledged tombstones, superseded statuses, clears,
    /// synced-through and padding records) is dead: what compaction drops and
    /// `steplog stats` counts as dead bytes.
    public func isLive(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) throws -> Bool {
        switch RecordType(rawValue: rawType) {
        case .sampleUpsert:
            return SamplePayload.isWellFormed(payload) && index.entry(SamplePayload.uuid(payload), at: position) != nil
        case .sampleDeleted:
            return TombstonePayload.isWellFormed(payload) && index.entry(TombstonePayload.uuid(payload), at: position) != nil
        case .intervalStatus:
            guard payload.count >= 16 else { return false }
            return intervals.entry(id: UUIDBytes(loadingFrom: payload, at: 0).uuid)?.position == position
        case .layeringRange:
            return intervals.rangePositions.contains(position)
        case .dailyHighScore:
            guard payload.count >= 4 else { return false }
            let day = UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            return highScorePositions[day] == position
        case .sourceAnchor:
            guard payload.count >= 8 else { return false }
            let family = UInt64(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
            return anchors[family]?.position == position
        case .samplesRejected:
            guard case .success(let list) = RejectionPayload.decode(payload) else { return false }
            return try list.contains { try isRejectionCurrent(UUIDBytes($0.id), recordedAt: position) }
        case .samplesAcknowledged, .intervalsCleared, .syncedThrough, .padding, nil:
            return false
        }
    }
}
