import Foundation

/// Everything the log means, in memory: the sample index with its counters,
/// the intervals, the daily high scores. Built by applying records in log
/// order; the one place that says what each record type does.
public final class StoreState {
    public let index = SampleIndex()
    public internal(set) var unsyncedCount = 0
    public internal(set) var intervals = IntervalTable()
    public internal(set) var highScores: [UInt32: DailyHighScore] = [:]
    /// Position of the record that set each day's high score.
    var highScorePositions: [UInt32: LogPosition] = [:]
    /// Positions below this hold no unsynced current version (a lower bound the
    /// unsynced scan raises as it goes).
    var unsyncedFloor = LogPosition.zero

    public init() {}

    public var sampleCount: Int { index.count }
    public var syncedCount: Int { index.count - unsyncedCount }

    /// Sample versions read by replay but not yet applied: replay prefetches
    /// each one's index slot and applies them in groups, so the cache misses
    /// overlap. Any other record, and `finishReplay`, applies them first.
    private var queuedKeys: [UUIDBytes] = []
    private var queuedEntries: [IndexEntry] = []
    static let replayGroup = 32

    /// Applies one checksummed record found at `position` during replay.
    /// Returns a problem when the payload does not have its type's shape
    /// (corruption). Call `finishReplay` after the last record.
    @inline(__always)
    public func replay(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) -> PayloadProblem? {
        if rawType == RecordType.sampleUpsert.rawValue {
            guard SamplePayload.isWellFormed(payload) else {
                return PayloadProblem("sample-upsert payload of \(payload.count) bytes is malformed")
            }
            let key = SamplePayload.uuid(payload)
            index.prefetch(key)
            queuedKeys.append(key)
            queuedEntries.append(IndexEntry(position: position,
                                            synced: SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0))
            if queuedKeys.count == Self.replayGroup { applyQueued() }
            return nil
        }
        applyQueued()
        if rawType == RecordType.samplesSynced.rawValue {
            guard payload.count >= 4 else { return PayloadProblem("samples-synced payload of \(payload.count) bytes is too short") }
            let n = Int(UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
            guard payload.count == 4 + 16 * n else {
                return PayloadProblem("samples-synced payload of \(payload.count) bytes does not match its count \(n)")
            }
            var i = 0
            while i < n {
                let end = min(n, i + Self.replayGroup)
                for j in i..<end { index.prefetch(UUIDBytes(loadingFrom: payload, at: 4 + 16 * j)) }
                for j in i..<end { applySynced(UUIDBytes(loadingFrom: payload, at: 4 + 16 * j)) }
                i = end
            }
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

    /// Applies sample versions still queued by `replay`.
    public func finishReplay() { applyQueued() }

    @inline(__always)
    private func applyQueued() {
        guard !queuedKeys.isEmpty else { return }
        var unsynced = unsyncedCount
        for i in 0..<queuedKeys.count {
            let entry = queuedEntries[i]
            let old = index.set(queuedKeys[i], entry)
            let wasUnsynced = old.map { !$0.isSynced } ?? false
            if wasUnsynced && entry.isSynced { unsynced -= 1 }
            if !wasUnsynced && !entry.isSynced { unsynced += 1 }
        }
        unsyncedCount = unsynced
        queuedKeys.removeAll(keepingCapacity: true)
        queuedEntries.removeAll(keepingCapacity: true)
    }

    /// Applies a decoded record (the slow path, for everything but samples).
    public func apply(_ record: LogRecord, at position: LogPosition) {
        switch record {
        case .sampleUpsert(let r):
            applySampleVersion(UUIDBytes(r.sample.id), position: position, synced: r.isSynced)
        case .samplesSynced(let ids):
            for id in ids { applySynced(UUIDBytes(id)) }
        case .intervalStatus(let interval):
            intervals.apply(interval, at: position)
        case .intervalsCleared:
            intervals.clear()
        case .layeringRange(let range):
            intervals.applyRange(range, at: position)
        case .dailyHighScore(let score):
            highScores[score.day] = score
            highScorePositions[score.day] = position
        }
    }

    @inline(__always)
    func applySampleVersion(_ id: UUIDBytes, position: LogPosition, synced: Bool) {
        let old = index.set(id, IndexEntry(position: position, synced: synced))
        let wasUnsynced = old.map { !$0.isSynced } ?? false
        if wasUnsynced && synced { unsyncedCount -= 1 }
        if !wasUnsynced && !synced { unsyncedCount += 1 }
    }

    /// Marks the current version of `id` synced (a `samplesSynced` entry).
    /// Returns true when it was unsynced.
    @inline(__always)
    @discardableResult
    func applySynced(_ id: UUIDBytes) -> Bool {
        var changed = false
        index.update(id) { entry in
            if !entry.isSynced { changed = true }
            return entry.withSynced(true)
        }
        if changed { unsyncedCount -= 1 }
        return changed
    }
}

extension StoreState {
    /// True when the record at `position` still means something: the current
    /// version of a sample, the latest status of a current interval, a current
    /// layering range, the latest high score of a day. Everything else (older
    /// versions, synced markers, superseded statuses, clears) is dead: what
    /// compaction drops and `steplog stats` counts as dead bytes.
    public func isLive(type rawType: UInt8, payload: UnsafeRawBufferPointer, at position: LogPosition) -> Bool {
        switch RecordType(rawValue: rawType) {
        case .sampleUpsert:
            return SamplePayload.isWellFormed(payload) && index.find(SamplePayload.uuid(payload))?.position == position
        case .intervalStatus:
            guard payload.count >= 16 else { return false }
            return intervals.entry(id: UUIDBytes(loadingFrom: payload, at: 0).uuid)?.position == position
        case .layeringRange:
            return intervals.rangePositions.contains(position)
        case .dailyHighScore:
            guard payload.count >= 4 else { return false }
            let day = UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
            return highScorePositions[day] == position
        case .samplesSynced, .intervalsCleared, nil:
            return false
        }
    }
}
