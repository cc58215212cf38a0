#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CStepLogSupport

/// The in-memory map from sample UUID to its latest version (`IndexEntry`),
/// keeping no UUID in memory (after FAWN-DS and SILT).
///
/// One open-addressing hash table with linear probing. A slot is 12 packed
/// bytes: the 50-bit entry and a 46-bit *tag*, the top 46 bits of the UUID's
/// hash (`UUIDBytes.mixedHash`):
///
///     0 u64: entry bits 0..<50 | tag bits 0..<14 << 50    8 u32: tag bits 14..<46
///
/// An empty slot has entry 0 (position 0 is inside the first segment's
/// header, so no record is there). A lookup walks the probe run from the
/// key's home slot; a slot whose tag equals the key's is the key's only if
/// the record its entry points at carries the key's UUID, which `keyAt` (the
/// store's record reader) confirms: a tag is only a fingerprint, and two UUIDs
/// may share one. Callers that already know the position of the version they
/// mean (a scan reading records, an acknowledgement of a version read before)
/// use `entry(_:at:)`, which needs no read: the record at a position has one
/// UUID. The last slot confirmed is remembered, checked by position so it
/// can never be wrong: an upsert finds, then sets, the same key with one read.
///
/// The home slot scales the tag onto the table (`tag << 18 * capacity >> 64`,
/// Lemire's multiply-shift), monotone in the hash, so the table holds keys in
/// (nearly) hash order and growing needs nothing but the slots: the home of
/// every entry at the new capacity comes from its tag. Growing walks the old
/// table front to back and writes the new one almost sequentially; a bulk
/// load sorted by hash writes it sequentially too.
///
/// Because the home slot needs no mask, the capacity need not be a power of
/// two: a rebuild of known size (opening a store) allocates for 80% load, 15
/// bytes per key. A table that fills past 87.5% doubles, so one grown key by
/// key costs 13.7–27.4 bytes per key. Large tables ask for transparent huge
/// pages: probes are random, and TLB misses would otherwise double their cost.
///
/// Not thread-safe: the store serializes access. (Opening a large store fills
/// the table on two threads, each in a lane of it, with a key cache per band
/// of slots: `SampleIndex+Lanes.swift`.)
public final class SampleIndex {
    public static let slotSize = 12
    static let minimumCapacity = 1 << 10
    /// Bits of a slot's first u64 the entry takes (`IndexEntry`: 50); the tag
    /// has the rest of it, and the u32 after.
    static let entryBits: UInt64 = 50
    static let entryMask: UInt64 = (1 << 50) - 1
    /// A tag is the top 96 - 50 = 46 bits of the hash: the hash shifted right by 18.
    static let tagShift: UInt64 = 18

    // The table's geometry and key count, kept behind a pointer (see `Table`).
    private var slots: UnsafeMutableRawPointer {
        get { table.pointee.slots }
        set { table.pointee.slots = newValue }
    }
    var capacity: Int {
        get { table.pointee.capacity }
        set { table.pointee.capacity = newValue }
    }
    var threshold: Int {
        get { table.pointee.threshold }
        set { table.pointee.threshold = newValue }
    }
    /// Faulting in a table reserved for a rebuild, if that is still going on.
    private var populator: BackgroundPopulator?
    /// Number of keys.
    public var count: Int { table.pointee.count &+ main.state.pointee.added }

    /// The UUID of the sample or tombstone record at a position: how a tag
    /// match is confirmed. Set by the index's owner before the first lookup.
    public var keyAt: ((LogPosition) throws -> UUIDBytes)? {
        get { main.state.pointee.keyAt }
        set { main.state.pointee.keyAt = newValue }
    }
    /// The hash of a key (`mixedHash` unless a test forces collisions).
    private let hashFunction: ((UUIDBytes) -> UInt64)?
    /// Tag matches `keyAt` was asked to confirm (tests and benchmarks).
    public var confirmingReads: Int { table.pointee.confirmingReads &+ main.state.pointee.confirmingReads }

    /// The table's geometry and key count. Kept behind a pointer the index
    /// owns, as `Lane.State` is: as stored properties of the class, each
    /// access would pay a dynamic exclusivity check.
    struct Table {
        var slots = UnsafeMutableRawPointer(bitPattern: 64)!
        var capacity = 0
        var threshold = 0
        /// Keys, less those the lanes added since they were last absorbed.
        var count = 0
        /// Confirming reads of lanes absorbed.
        var confirmingReads = 0
    }
    let table: UnsafeMutablePointer<Table> = {
        let p = UnsafeMutablePointer<Table>.allocate(capacity: 1)
        p.initialize(to: Table())
        return p
    }()

    /// What one thread's operations keep between calls: the reader that
    /// confirms tag matches, the slot it last confirmed, the keys it added.
    /// Every operation here uses the index's own lane (`main`), which may
    /// touch any slot; the fields that bound a lane to part of the table, and
    /// its key cache, are `SampleIndex+Lanes.swift`'s.
    public final class Lane {
        struct State {
            var keyAt: ((LogPosition) throws -> UUIDBytes)?
            /// The last slot a lookup confirmed: slot, entry bits, key.
            var slot = -1
            var raw: UInt64 = 0
            var key = UUIDBytes(high: 0, low: 0)
            var confirmingReads = 0
            /// Keys this lane added (inserts less removals).
            var added = 0
            // SampleIndex+Lanes.swift: the key cache, and a bounded lane's slots and budget.
            var cache: UnsafeMutablePointer<UInt64>?
            var cacheMask = 0
            var start = 0
            var limit = Int.max
            var budget = Int.max
        }
        let state: UnsafeMutablePointer<State>

        init(_ initial: State) {
            // Lanes are written on every operation by different threads: each
            // on cache lines of its own (no false sharing).
            state = UnsafeMutableRawPointer.allocate(byteCount: (MemoryLayout<State>.stride + 127) / 128 * 128, alignment: 128)
                .bindMemory(to: State.self, capacity: 1)
            state.initialize(to: initial)
        }

        deinit {
            state.pointee.cache?.deallocate()
            state.deinitialize(count: 1)
            state.deallocate()
        }
    }

    /// The lane of every operation here.
    let main = Lane(Lane.State())

    /// `hash` replaces `UUIDBytes.mixedHash` (tests force tag collisions with it).
    public init(expectedKeys: Int = 0, hash: ((UUIDBytes) -> UInt64)? = nil) {
        hashFunction = hash
        capacity = Self.capacity(for: expectedKeys)
        threshold = Self.threshold(capacity)
        slots = Self.allocateSlots(capacity).slots
    }

    deinit {
        populator?.stop()
        Self.freeSlots(slots, capacity)
        table.deinitialize(count: 1)
        table.deallocate()
    }

    /// Slots for `keys` keys at 80% load, a whole number of KiB-slots.
    static func capacity(for keys: Int) -> Int {
        let wanted = keys + keys / 4
        return max(minimumCapacity, (wanted + minimumCapacity - 1) / minimumCapacity * minimumCapacity)
    }

    /// Keys past which the table doubles: 87.5% load.
    private static func threshold(_ capacity: Int) -> Int { capacity - capacity / 8 }

    /// Tables of 2 MiB and more are anonymous mappings (zero-filled by the
    /// kernel, so never cleared twice) with a transparent-huge-page hint;
    /// smaller ones come from calloc.
    private static let mappingThreshold = 2 << 20

    /// A table's memory; a large one is faulted in before this returns (a
    /// table about to be filled by rehashing) or, with `inBackground`, by a
    /// `BackgroundPopulator` (a table reserved for a rebuild, whose first
    /// writes can wait on the snapshots being checked).
    private static func allocateSlots(_ capacity: Int, inBackground: Bool = false)
        -> (slots: UnsafeMutableRawPointer, populator: BackgroundPopulator?) {
        let bytes = capacity * slotSize + 64
        if bytes >= mappingThreshold {
            guard let memory = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                  memory != MAP_FAILED else { fatalError("cannot map \(bytes) bytes for the index") }
            #if canImport(Glibc)
            _ = madvise(memory, bytes, MADV_HUGEPAGE)
            if inBackground { return (memory, BackgroundPopulator(base: memory, bytes: bytes)) }
            // Fault the whole table in with one call (MADV_POPULATE_WRITE, Linux
            // 5.14+): cheaper than a fault per page during the first probes.
            // Older kernels answer EINVAL and pages fault in lazily.
            _ = madvise(memory, bytes, 23)
            #endif
            return (memory, nil)
        }
        guard let memory = calloc(1, bytes) else { fatalError("cannot allocate \(bytes) bytes for the index") }
        return (memory, nil)
    }

    private static func freeSlots(_ slots: UnsafeMutableRawPointer, _ capacity: Int) {
        let bytes = capacity * slotSize + 64
        if bytes >= mappingThreshold { munmap(slots, bytes) } else { free(slots) }
    }

    // MARK: Slot access

    @inline(__always) private func slotPointer(_ i: Int) -> UnsafeMutableRawPointer { slots + i &* Self.slotSize }

    /// The 46-bit tag of `key`.
    @inline(__always) func tag(_ key: UUIDBytes) -> UInt64 {
        (hashFunction.map { $0(key) } ?? key.mixedHash) >> Self.tagShift
    }

    /// The tag of `key`, given its `mixedHash` (which a caller needed anyway).
    @inline(__always) func tag(_ key: UUIDBytes, mixedHash: UInt64) -> UInt64 {
        hashFunction == nil ? mixedHash >> Self.tagShift : tag(key)
    }

    @inline(__always) func home(_ tag: UInt64) -> Int {
        Int(truncatingIfNeeded: (tag << Self.tagShift).multipliedFullWidth(by: UInt64(truncatingIfNeeded: capacity)).high)
    }

    @inline(__always) private static func raw(at p: UnsafeMutableRawPointer) -> UInt64 {
        p.loadUnaligned(as: UInt64.self) & entryMask
    }

    @inline(__always) private static func tag(at p: UnsafeMutableRawPointer) -> UInt64 {
        p.loadUnaligned(as: UInt64.self) >> entryBits | UInt64(p.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) << (64 - entryBits)
    }

    @inline(__always) private static func store(raw: UInt64, tag: UInt64, at p: UnsafeMutableRawPointer) {
        p.storeBytes(of: raw | tag << entryBits, as: UInt64.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: tag >> (64 - entryBits)), toByteOffset: 8, as: UInt32.self)
    }

    @inline(__always) private static func store(raw: UInt64, at p: UnsafeMutableRawPointer) {
        let word = p.loadUnaligned(as: UInt64.self)
        p.storeBytes(of: word & ~entryMask | raw, as: UInt64.self)
    }

    /// True when the slot `i`, holding entry bits `raw` and the key's tag, is `key`'s.
    @inline(__always)
    private func confirm(_ key: UUIDBytes, slot i: Int, raw: UInt64, _ m: UnsafeMutablePointer<Lane.State>) throws -> Bool {
        // The last slot confirmed, and the key cache when one is on
        // (SampleIndex+Lanes.swift), hold a UUID beside the position it was
        // read or written at; the record at a position has one UUID, so a hit is exact.
        let position = raw & FormatConstants.maxPosition
        if m.pointee.slot == i && m.pointee.raw & FormatConstants.maxPosition == position { return m.pointee.key == key }
        if let cached = Self.cachedKey(slot: i, position: position, m) { return cached == key }
        guard let keyAt = m.pointee.keyAt else { preconditionFailure("SampleIndex.keyAt is not set: a tag match cannot be confirmed") }
        m.pointee.confirmingReads += 1
        let found = try keyAt(IndexEntry(rawValue: raw).position)
        m.pointee.slot = i
        m.pointee.raw = raw
        m.pointee.key = found
        return found == key
    }

    /// Remembers that slot `i`, now holding `raw`, is `key`'s.
    @inline(__always)
    private func remember(_ key: UUIDBytes, slot i: Int, raw: UInt64, _ m: UnsafeMutablePointer<Lane.State>) {
        m.pointee.slot = i
        m.pointee.raw = raw
        m.pointee.key = key
        Self.cacheKey(key, slot: i, raw: raw, m)
    }

    /// The slot holding `key`, or the empty slot where it would go. (A
    /// bounded lane throws `LaneOverflow` when the key's home or the probe run
    /// leaves its slots.)
    @inline(__always)
    private func probe(_ key: UUIDBytes, tag: UInt64, _ m: UnsafeMutablePointer<Lane.State>) throws -> (slot: Int, found: Bool) {
        var i = home(tag)
        let limit = m.pointee.limit
        if limit != Int.max && (i < m.pointee.start || i >= limit) { throw LaneOverflow() }
        while true {
            let p = slotPointer(i)
            let raw = Self.raw(at: p)
            if raw == 0 { return (i, false) }
            if Self.tag(at: p) == tag, try confirm(key, slot: i, raw: raw, m) { return (i, true) }
            i &+= 1
            if i == limit { throw LaneOverflow() }
            if i == capacity { i = 0 }
        }
    }

    // MARK: Public operations

    /// Starts loading the home slot of `key` into cache. Callers that know the
    /// keys they will touch next (a replayed batch, an upserted batch) prefetch
    /// them first, so the misses overlap instead of queueing.
    @inline(__always)
    public func prefetch(_ key: UUIDBytes) { prefetch(key, mixedHash: key.mixedHash) }

    /// `prefetch`, given the key's `mixedHash`.
    @inline(__always)
    public func prefetch(_ key: UUIDBytes, mixedHash: UInt64) {
        let p = slotPointer(home(tag(key, mixedHash: mixedHash)))
        steplog_prefetch(p)
        steplog_prefetch(p + 64) // a probe run often crosses into the next line
    }

    /// The entry for `key`, if present. A tag match costs a read of the
    /// record it points at (`keyAt`), unless remembered.
    @inline(__always)
    public func find(_ key: UUIDBytes) throws -> IndexEntry? { try find(key, tag: tag(key), main.state) }

    @inline(__always)
    func find(_ key: UUIDBytes, tag: UInt64, _ m: UnsafeMutablePointer<Lane.State>) throws -> IndexEntry? {
        let (i, found) = try probe(key, tag: tag, m)
        return found ? IndexEntry(rawValue: Self.raw(at: slotPointer(i))) : nil
    }

    /// The entry for `key` and what `examine` made of the record it points
    /// at, if `key` is present: the lookup of a caller that reads the record
    /// anyway (an upsert compares contents), so the read that confirms a tag
    /// match is that one. `examine` is called with each entry whose tag is
    /// `key`'s, in probe order, and returns nil when the record there is not
    /// `key`'s (another UUID with the same tag), which goes on probing.
    @inline(__always)
    public func find<T>(_ key: UUIDBytes, examining examine: (IndexEntry) throws -> T?) throws -> (entry: IndexEntry, examined: T)? {
        let tag = tag(key)
        var i = home(tag)
        while true {
            let p = slotPointer(i)
            let raw = Self.raw(at: p)
            if raw == 0 { return nil }
            if Self.tag(at: p) == tag, !isKnownOther(key, slot: i, raw: raw), let examined = try examine(IndexEntry(rawValue: raw)) {
                remember(key, slot: i, raw: raw, main.state)
                return (IndexEntry(rawValue: raw), examined)
            }
            i &+= 1
            if i == capacity { i = 0 }
        }
    }

    /// True when a shortcut of `confirm` knows slot `i` (holding `raw`) is
    /// another key's, so no read need tell.
    @inline(__always)
    private func isKnownOther(_ key: UUIDBytes, slot i: Int, raw: UInt64) -> Bool {
        let position = raw & FormatConstants.maxPosition
        let m = main.state
        if m.pointee.slot == i && m.pointee.raw & FormatConstants.maxPosition == position { return m.pointee.key != key }
        if let cached = Self.cachedKey(slot: i, position: position, m) { return cached != key }
        return false
    }

    /// The entry for `key` if its current version is the record at
    /// `position`, which the caller read and found to carry `key`: a slot with
    /// `key`'s tag pointing there is `key`'s, so no read confirms it.
    @inline(__always)
    public func entry(_ key: UUIDBytes, at position: LogPosition) -> IndexEntry? {
        let tag = tag(key)
        var i = home(tag)
        while true {
            let p = slotPointer(i)
            let raw = Self.raw(at: p)
            if raw == 0 { return nil }
            if raw & FormatConstants.maxPosition == position.rawValue && Self.tag(at: p) == tag {
                return IndexEntry(rawValue: raw)
            }
            i &+= 1
            if i == capacity { i = 0 }
        }
    }

    /// Inserts or replaces the entry for `key`; returns the previous entry.
    @discardableResult
    @inline(__always)
    public func set(_ key: UUIDBytes, _ entry: IndexEntry) throws -> IndexEntry? {
        try set(key, entry, tag: tag(key), main.state)
    }

    @inline(__always)
    func set(_ key: UUIDBytes, _ entry: IndexEntry, tag: UInt64, _ m: UnsafeMutablePointer<Lane.State>) throws -> IndexEntry? {
        precondition(entry.position.rawValue != 0, "position 0 holds no record (it marks empty index slots)")
        if m.pointee.limit == Int.max {
            if count >= threshold { grow() }
        } else if m.pointee.added >= m.pointee.budget {
            throw LaneOverflow() // a lane never grows the table
        }
        let (i, found) = try probe(key, tag: tag, m)
        let p = slotPointer(i)
        if found {
            let old = IndexEntry(rawValue: Self.raw(at: p))
            Self.store(raw: entry.rawValue, at: p)
            remember(key, slot: i, raw: entry.rawValue, m)
            return old
        }
        Self.store(raw: entry.rawValue, tag: tag, at: p)
        remember(key, slot: i, raw: entry.rawValue, m)
        m.pointee.added &+= 1
        return nil
    }

    /// Replaces the entry of a present key with `transform(entry)`; returns the
    /// old entry, or nil (and changes nothing) when the key is absent.
    @discardableResult
    @inline(__always)
    public func update(_ key: UUIDBytes, _ transform: (IndexEntry) -> IndexEntry) throws -> IndexEntry? {
        try update(key, tag: tag(key), main.state, transform)
    }

    @inline(__always)
    func update(_ key: UUIDBytes, tag: UInt64, _ m: UnsafeMutablePointer<Lane.State>, _ transform: (IndexEntry) -> IndexEntry) throws -> IndexEntry? {
        let (i, found) = try probe(key, tag: tag, m)
        guard found else { return nil }
        let p = slotPointer(i)
        let old = IndexEntry(rawValue: Self.raw(at: p))
        let new = transform(old)
        precondition(new.position.rawValue != 0, "position 0 holds no record (it marks empty index slots)")
        Self.store(raw: new.rawValue, at: p)
        remember(key, slot: i, raw: new.rawValue, m)
        return old
    }

    /// Removes `key`; returns its entry, or nil when it was absent.
    ///
    /// Backward-shift deletion (no tombstone slots): the entries after the
    /// freed slot in its probe run move back into it when their home allows,
    /// so every remaining key stays reachable from its home and lookups never
    /// slow down with deletions. Keeps the table in (nearly) hash order.
    @discardableResult
    public func remove(_ key: UUIDBytes) throws -> IndexEntry? { try remove(key, tag: tag(key), main.state) }

    func remove(_ key: UUIDBytes, tag: UInt64, _ m: UnsafeMutablePointer<Lane.State>) throws -> IndexEntry? {
        let (start, found) = try probe(key, tag: tag, m)
        guard found else { return nil }
        if m.pointee.limit != Int.max {
            // A bounded lane first finds where the probe run ends, so that one
            // leaving its slots changes nothing.
            var i = start &+ 1
            while i < m.pointee.limit && Self.raw(at: slotPointer(i)) != 0 { i &+= 1 }
            if i == m.pointee.limit { throw LaneOverflow() }
        }
        let old = IndexEntry(rawValue: Self.raw(at: slotPointer(start)))
        var hole = start
        var i = hole
        while true {
            i &+= 1
            if i == capacity { i = 0 }
            let q = slotPointer(i)
            if Self.raw(at: q) == 0 { break }
            // The entry at i may move to the hole when its home is not in the
            // cyclic range (hole, i]: it would then be probed past the hole.
            let h = home(Self.tag(at: q))
            let inRange = hole <= i ? (h > hole && h <= i) : (h > hole || h <= i)
            if !inRange {
                slotPointer(hole).copyMemory(from: q, byteCount: Self.slotSize)
                hole = i
            }
        }
        slotPointer(hole).initializeMemory(as: UInt8.self, repeating: 0, count: Self.slotSize)
        m.pointee.slot = -1
        m.pointee.added &-= 1
        return old
    }

    /// Doubles the capacity.
    private func grow() { rehash(toCapacity: capacity * 2) }

    /// Moves every entry into a new table of `newCapacity` slots, each to the
    /// home its tag gives. The old table is walked in slot order, which is
    /// hash order, so the new one is written nearly sequentially.
    private func rehash(toCapacity newCapacity: Int, populateInBackground: Bool = false) {
        let oldSlots = slots, oldCapacity = capacity
        populator?.stop()
        capacity = newCapacity
        threshold = Self.threshold(capacity)
        (slots, populator) = Self.allocateSlots(capacity, inBackground: populateInBackground)
        main.state.pointee.slot = -1
        for i in 0..<oldCapacity {
            let p = oldSlots + i * Self.slotSize
            if Self.raw(at: p) == 0 { continue }
            var j = home(Self.tag(at: p))
            while Self.raw(at: slotPointer(j)) != 0 {
                j &+= 1
                if j == capacity { j = 0 }
            }
            slotPointer(j).copyMemory(from: p, byteCount: Self.slotSize)
        }
        Self.freeSlots(oldSlots, oldCapacity)
    }

    /// Makes room for `expectedKeys` keys, so a rebuild of known size never
    /// rehashes. An empty index allocates the final size at once and has its
    /// pages faulted in on another thread while the rebuild starts.
    public func reserve(_ expectedKeys: Int) {
        let wanted = Self.capacity(for: expectedKeys)
        if wanted > capacity { rehash(toCapacity: wanted, populateInBackground: count == 0) }
    }

    /// Calls `body` for every entry, in slot order (the UUIDs are in the
    /// records the entries point at).
    public func forEach(_ body: (IndexEntry) throws -> Void) rethrows {
        for i in 0..<capacity {
            let raw = Self.raw(at: slotPointer(i))
            if raw != 0 { try body(IndexEntry(rawValue: raw)) }
        }
    }

    /// Bytes allocated for slots (the figure "index bytes per key" divides).
    public var memoryBytes: Int { capacity * Self.slotSize }

    /// Re-sizes the table for 80% load when it is more than an eighth larger
    /// than that (after a rebuild that reserved for more keys than it found:
    /// opening guesses one per 80 bytes of the newest segment, and re-upserts
    /// add none). Walks in hash order, so it is nearly sequential.
    public func shrinkToFit() {
        let target = Self.capacity(for: count)
        if target < capacity - capacity / 8 { rehash(toCapacity: target) }
    }
}
