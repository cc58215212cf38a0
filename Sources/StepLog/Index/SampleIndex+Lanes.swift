/// Filling the index on several threads at once, and confirming tag matches
/// from memory while a band of it is filled: what opening a store of a
/// hundred million samples from its snapshots needs (`SnapshotBandApplier`),
/// and nothing else does.
///
/// A lane fills the keys homed in a range of slots while another thread
/// fills another range. A bounded lane (`makeLane`) throws `LaneOverflow`
/// from an operation that would reach outside its slots (a key homed outside
/// them, a probe run reaching `limit`) or insert more than `budget` keys,
/// before changing anything; the caller then repeats that operation, and the
/// rest, on the index's own lane once the other threads are done.
///
/// A key cache is a direct-mapped cache of (position, UUID) per slot, filled
/// by `set`: while a band of slots is filled, a later tag match in it is
/// confirmed from memory instead of from the record on disk. Checked by
/// position, so it can never be wrong.
extension SampleIndex {
    /// Thrown by an operation of a bounded lane that would reach outside its
    /// slots; nothing was changed.
    public struct LaneOverflow: Error {}

    /// The lane of every operation called without one.
    public var ownLane: Lane { main }

    /// A lane for another thread that fills the keys homed in `slots` while
    /// this one fills others: it touches no slot outside `slots`, adds at
    /// most `budget` keys (so the table never needs to grow meanwhile),
    /// confirms tag matches with `keyAt`, and keeps a key cache of
    /// `cacheEntries` (see `setKeyCache`). Call `absorb` once its thread is done.
    public func makeLane(slots: Range<Int>, budget: Int, keyAt: @escaping (LogPosition) throws -> UUIDBytes,
                         cacheEntries: Int) -> Lane {
        precondition(slots.lowerBound >= 0 && slots.upperBound <= capacity, "a lane's slots must be in the table")
        let lane = Lane(Lane.State(keyAt: keyAt, start: slots.lowerBound, limit: slots.upperBound, budget: budget))
        Self.setKeyCache(entries: cacheEntries, lane.state)
        return lane
    }

    /// Counts what `lane` added (keys, confirming reads) into the index's
    /// own counts. Call when no other thread uses the lane any more.
    public func absorb(_ lane: Lane) {
        table.pointee.count &+= lane.state.pointee.added
        table.pointee.confirmingReads &+= lane.state.pointee.confirmingReads
        lane.state.pointee.added = 0
        lane.state.pointee.confirmingReads = 0
    }

    /// Slots in the table.
    public var slotCount: Int { capacity }

    /// Keys that can be added before the table grows (lanes share them).
    public var roomBeforeGrowing: Int { max(0, threshold - count) }

    /// The home slot of keys whose hash is `hash`: where a range of hashes
    /// begins in the table (the home is monotone in the hash).
    public func homeSlot(ofHash hash: UInt64) -> Int { home(hash >> Self.tagShift) }

    /// Slots one band of `bytes` of table covers.
    public static func slots(inBytes bytes: Int) -> Int { bytes / slotSize }

    // MARK: Operations on a lane

    /// `find` on `lane`, given the key's `mixedHash`.
    @inline(__always)
    public func find(_ key: UUIDBytes, in lane: Lane, mixedHash: UInt64) throws -> IndexEntry? {
        try find(key, tag: tag(key, mixedHash: mixedHash), lane.state)
    }

    /// `set` on `lane`, given the key's `mixedHash`.
    @discardableResult
    @inline(__always)
    public func set(_ key: UUIDBytes, _ entry: IndexEntry, in lane: Lane, mixedHash: UInt64) throws -> IndexEntry? {
        try set(key, entry, tag: tag(key, mixedHash: mixedHash), lane.state)
    }

    /// `update` on `lane`, given the key's `mixedHash`.
    @discardableResult
    @inline(__always)
    public func update(_ key: UUIDBytes, in lane: Lane, mixedHash: UInt64, _ transform: (IndexEntry) -> IndexEntry) throws -> IndexEntry? {
        try update(key, tag: tag(key, mixedHash: mixedHash), lane.state, transform)
    }

    /// `remove` on `lane`, given the key's `mixedHash`.
    @discardableResult
    public func remove(_ key: UUIDBytes, in lane: Lane, mixedHash: UInt64) throws -> IndexEntry? {
        try remove(key, tag: tag(key, mixedHash: mixedHash), lane.state)
    }

    // MARK: Key cache

    /// Turns the own lane's key cache on with `entries` (rounded up to a
    /// power of two) position-checked UUIDs, or off with 0. Worth it while a
    /// hash range of at most that many slots is filled (opening applies
    /// snapshots band by band).
    public func setKeyCache(entries: Int) { Self.setKeyCache(entries: entries, main.state) }

    static func setKeyCache(entries: Int, _ m: UnsafeMutablePointer<Lane.State>) {
        m.pointee.cache?.deallocate()
        m.pointee.cache = nil
        m.pointee.cacheMask = 0
        guard entries > 0 else { return }
        var size = 1
        while size < entries { size <<= 1 }
        let cache = UnsafeMutablePointer<UInt64>.allocate(capacity: size * 3)
        // Entry bits 0 match no slot (0 marks an empty one).
        for k in 0..<size { cache[k * 3] = 0 }
        m.pointee.cache = cache
        m.pointee.cacheMask = size - 1
    }

    /// The UUID the key cache holds for slot `i` at `position`, if it does.
    @inline(__always)
    static func cachedKey(slot i: Int, position: UInt64, _ m: UnsafeMutablePointer<Lane.State>) -> UUIDBytes? {
        guard let cache = m.pointee.cache else { return nil }
        let c = cache + (i & m.pointee.cacheMask) &* 3
        return c[0] & FormatConstants.maxPosition == position ? UUIDBytes(high: c[1], low: c[2]) : nil
    }

    /// Notes in the key cache, when it is on, that slot `i` now holds `raw` for `key`.
    @inline(__always)
    static func cacheKey(_ key: UUIDBytes, slot i: Int, raw: UInt64, _ m: UnsafeMutablePointer<Lane.State>) {
        guard let cache = m.pointee.cache else { return }
        let c = cache + (i & m.pointee.cacheMask) &* 3
        c[0] = raw
        c[1] = key.high
        c[2] = key.low
    }
}
