import Foundation

/// Everything the log means, in memory: the sample index with its counters,
/// the intervals, the daily high scores, the source anchors. Built by applying
/// records in log order; the one place that says what each record type does.
///
/// The index holds every UUID that is live or has a pending deletion; an
/// acknowledged deletion removes the UUID.
public final class StoreState {
    public let index = SampleIndex()
    /// Live samples whose current version the server has not acknowledged.
    public internal(set) var unsyncedCount = 0
    /// Tombstones in the index: deletions the server has not acknowledged.
    public internal(set) var pendingDeletionCount = 0
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

    public init() {}

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
    public func replay(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) -> PayloadProblem? {
        if rawType == RecordType.sampleUpsert.rawValue {
            guard SamplePayload.isWellFormed(payload) else {
                return SamplePayload.problem(payload)
            }
            queue(SamplePayload.uuid(payload), IndexEntry(position: position,
                                                          synced: SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0))
            return nil
        }
        if rawType == RecordType.sampleDeleted.rawValue {
            guard TombstonePayload.isWellFormed(payload) else { return TombstonePayload.problem(payload) }
            queue(TombstonePayload.uuid(payload), .tombstone(at: position))
            return nil
        }
        applyQueued()
        if rawType == RecordType.samplesAcknowledged.rawValue {
            guard let n = AcknowledgedPayload.count(payload) else { return AcknowledgedPayload.problem(payload) }
            applyAcknowledged(payload, count: n)
            return nil
        }
        switch LogRecord.decode(type: rawType, payload: payload) {
        case .failure(let problem):
            return problem
        case .success(let record):
            apply(record, at: position)
            return nil
        }
    }

    @inline(__always)
    private func queue(_ key: UUIDBytes, _ entry: IndexEntry) {
        index.prefetch(key)
        queuedKeys.append(key)
        queuedEntries.append(entry)
        if queuedKeys.count == Self.replayGroup { applyQueued() }
    }

    /// Applies sample versions still queued by `replay`.
    public func finishReplay() { applyQueued() }

    @inline(__always)
    private func applyQueued() {
        guard !queuedKeys.isEmpty else { return }
        for i in 0..<queuedKeys.count { applyVersion(queuedKeys[i], queuedEntries[i]) }
        queuedKeys.removeAll(keepingCapacity: true)
        queuedEntries.removeAll(keepingCapacity: true)
    }

    /// Applies every UUID of a well-formed `samplesAcknowledged` payload, a
    /// group at a time with their slots prefetched.
    func applyAcknowledged(_ payload: UnsafeRawBufferPointer, count n: Int) {
        var i = 0
        while i < n {
            let end = min(n, i + Self.replayGroup)
            for j in i..<end { index.prefetch(AcknowledgedPayload.uuid(payload, j)) }
            for j in i..<end { applyAcknowledged(AcknowledgedPayload.uuid(payload, j)) }
            i = end
        }
    }

    /// Applies a decoded record (the slow path, for everything but samples).
    public func apply(_ record: LogRecord, at position: LogPosition) {
        switch record {
        case .sampleUpsert(let r):
            applyVersion(UUIDBytes(r.sample.id), IndexEntry(position: position, synced: r.isSynced))
        case .samplesAcknowledged(let ids):
            for id in ids { applyAcknowledged(UUIDBytes(id)) }
        case .sampleDeleted(let id, _):
            applyVersion(UUIDBytes(id), .tombstone(at: position))
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
    func applyVersion(_ id: UUIDBytes, _ entry: IndexEntry) {
        let old = index.set(id, entry)
        var unsynced = unsyncedCount, pending = pendingDeletionCount
        if let old {
            if old.isUnsyncedLive { unsynced -= 1 }
            if old.isTombstone { pending -= 1 }
        }
        if entry.isUnsyncedLive { unsynced += 1 }
        if entry.isTombstone { pending += 1 }
        unsyncedCount = unsynced
        pendingDeletionCount = pending
    }

    /// A sample version (`applyVersion` of a non-tombstone).
    @inline(__always)
    func applySampleVersion(_ id: UUIDBytes, position: LogPosition, synced: Bool) {
        applyVersion(id, IndexEntry(position: position, synced: synced))
    }

    /// Acknowledges the current version of `id` (one UUID of a
    /// `samplesAcknowledged` record): a live version becomes synced; a
    /// tombstone is done and the UUID leaves the index. Absent: nothing.
    @inline(__always)
    func applyAcknowledged(_ id: UUIDBytes) {
        guard let entry = index.find(id) else { return }
        if entry.isTombstone {
            index.remove(id)
            pendingDeletionCount -= 1
        } else if !entry.isSynced {
            index.update(id) { $0.withSynced(true) }
            unsyncedCount -= 1
        }
    }

    /// True when the rejection recorded at `position` for `id` is the latest
    /// for it and still applies: the sample's current version is live,
    /// unsynced, and written before the rejection (the version it rejected; a
    /// newer version, a deletion or a revival ends it).
    @inline(__always)
    func isRejectionCurrent(_ id: UUIDBytes, recordedAt position: LogPosition) -> Bool {
        guard rejections[id]?.position == position, let entry = index.find(id) else { return false }
        return entry.isUnsyncedLive && entry.position < position
    }

    /// True when the current version of `id`, at `versionPosition`, is rejected.
    @inline(__always)
    func isRejected(_ id: UUIDBytes, versionAt versionPosition: LogPosition) -> Bool {
        guard !rejections.isEmpty, let r = rejections[id] else { return false }
        return versionPosition < r.position && isRejectionCurrent(id, recordedAt: r.position)
    }

    /// The size a `samplesRejected` payload has once the entries that no
    /// longer apply are left out (what compaction writes).
    func liveRejectionPayloadSize(_ payload: UnsafeRawBufferPointer, at position: LogPosition) -> Int {
        guard case .success(let list) = RejectionPayload.decode(payload) else { return 0 }
        return list.filter { isRejectionCurrent(UUIDBytes($0.id), recordedAt: position) }
            .reduce(4) { $0 + 16 + 8 + 2 + RejectionPayload.clipped($1.reason).utf8.count }
    }

    /// Live samples whose current version is rejected.
    var rejectedCount: Int {
        rejections.reduce(0) { $0 + (isRejectionCurrent($1.key, recordedAt: $1.value.position) ? 1 : 0) }
    }

    /// Removes `id` whatever its state (a snapshot entry saying the UUID is
    /// absent after its segment).
    func applyRemoved(_ id: UUIDBytes) {
        guard let old = index.remove(id) else { return }
        if old.isUnsyncedLive { unsyncedCount -= 1 }
        if old.isTombstone { pendingDeletionCount -= 1 }
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
    public func isLive(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) -> Bool {
        switch RecordType(rawValue: rawType) {
        case .sampleUpsert:
            return SamplePayload.isWellFormed(payload) && index.find(SamplePayload.uuid(payload))?.position == position
        case .sampleDeleted:
            return TombstonePayload.isWellFormed(payload) && index.find(TombstonePayload.uuid(payload))?.position == position
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
            return list.contains { isRejectionCurrent(UUIDBytes($0.id), recordedAt: position) }
        case .samplesAcknowledged, .intervalsCleared, .syncedThrough, .padding, nil:
            return false
        }
    }
}
