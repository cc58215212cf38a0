#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CStepLogSupport

/// The in-memory map from sample UUID to its latest version (`IndexEntry`).
///
/// One open-addressing hash table with linear probing. A slot is 22 packed
/// bytes, key and entry together so a lookup touches one cache line:
///
///     0 key high u64 | 8 key low u64 | 16 entry bits 0..<32 u32 | 20 entry bits 32..<48 u16
///
/// The home slot scales the UUID's mixed hash onto the table
/// (`hash * capacity >> 64`, Lemire's multiply-shift), which is monotone in
/// the hash, so the table holds keys in (nearly) hash order: growing walks the
/// old table front to back and writes the new one almost sequentially, and a
/// bulk load sorted by hash writes it sequentially too. The nil UUID marks an
/// empty slot, which is why samples may not use it.
///
/// Because the home slot needs no mask, the capacity need not be a power of
/// two: a rebuild of known size (opening a store) allocates for 70% load, 31
/// bytes per key, instead of rounding up to as much as twice that. A table that
/// fills past 80% doubles, so one grown key by key costs 27.5–55 bytes per key
/// (36.9 at 10M keys). Large tables ask for transparent huge pages: probes are
/// random, and TLB misses would otherwise double their cost.
///
/// Not thread-safe: the store serializes access.
public final class SampleIndex {
    public static let slotSize = 22
    static let minimumCapacity = 1 << 10

    private var slots: UnsafeMutableRawPointer
    private var capacity: Int
    private var threshold: Int
    /// Faulting in a table reserved for a rebuild, if that is still going on.
    private var populator: BackgroundPopulator?
    /// Number of keys.
    public private(set) var count = 0

    public init(expectedKeys: Int = 0) {
        capacity = Self.capacity(for: expectedKeys)
        threshold = capacity - capacity / 5
        slots = Self.allocateSlots(capacity).slots
    }

    deinit {
        populator?.stop()
        Self.freeSlots(slots, capacity)
    }

    /// Slots for `keys` keys at 70% load, a whole number of KiB-slots.
    static func capacity(for keys: Int) -> Int {
        let wanted = keys + keys * 3 / 7
        return max(minimumCapacity, (wanted + minimumCapacity - 1) / minimumCapacity * minimumCapacity)
    }

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

    @inline(__always) private func home(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(truncatingIfNeeded: capacity)).high)
    }

    @inline(__always) private static func key(at p: UnsafeMutableRawPointer) -> UUIDBytes {
        UUIDBytes(high: p.loadUnaligned(as: UInt64.self), low: p.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
    }

    @inline(__always) private static func entry(at p: UnsafeMutableRawPointer) -> IndexEntry {
        IndexEntry(rawValue: UInt64(p.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
            | UInt64(p.loadUnaligned(fromByteOffset: 20, as: UInt16.self)) << 32)
    }

    @inline(__always) private static func store(_ entry: IndexEntry, at p: UnsafeMutableRawPointer) {
        p.storeBytes(of: UInt32(truncatingIfNeeded: entry.rawValue), toByteOffset: 16, as: UInt32.self)
        p.storeBytes(of: UInt16(truncatingIfNeeded: entry.rawValue >> 32), toByteOffset: 20, as: UInt16.self)
    }

    @inline(__always) private static func store(_ key: UUIDBytes, at p: UnsafeMutableRawPointer) {
        p.storeBytes(of: key.high, as: UInt64.self)
        p.storeBytes(of: key.low, toByteOffset: 8, as: UInt64.self)
    }

    /// The slot holding `key`, or the empty slot where it would go.
    @inline(__always)
    private func probe(_ key: UUIDBytes, hash: UInt64) -> (slot: UnsafeMutableRawPointer, found: Bool) {
        var i = home(hash)
        while true {
            let p = slotPointer(i)
            let high = p.loadUnaligned(as: UInt64.self)
            let low = p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            if high == key.high && low == key.low { return (p, true) }
            if high == 0 && low == 0 { return (p, false) }
            i &+= 1
            if i == capacity { i = 0 }
        }
    }

    // MARK: Public operations

    /// Starts loading the home slot of `key` into cache. Callers that know the
    /// keys they will touch next (a replayed batch, an upserted batch) prefetch
    /// them first, so the misses overlap instead of queueing.
    @inline(__always)
    public func prefetch(_ key: UUIDBytes) {
        let p = slotPointer(home(key.mixedHash))
        steplog_prefetch(p)
        steplog_prefetch(p + 64) // a 22-byte slot and its probe run often cross into the next line
    }

    /// The entry for `key`, if present. (The nil UUID, which marks empty
    /// slots, is never present.)
    @inline(__always)
    public func find(_ key: UUIDBytes) -> IndexEntry? {
        if key.isNil { return nil }
        let (p, found) = probe(key, hash: key.mixedHash)
        return found ? Self.entry(at: p) : nil
    }

    /// Inserts or replaces the entry for `key`; returns the previous entry.
    @discardableResult
    @inline(__always)
    public func set(_ key: UUIDBytes, _ entry: IndexEntry) -> IndexEntry? {
        precondition(!key.isNil, "the nil UUID cannot be indexed")
        if count >= threshold { grow() }
        let (p, found) = probe(key, hash: key.mixedHash)
        if found {
            let old = Self.entry(at: p)
            Self.store(entry, at: p)
            return old
        }
        Self.store(key, at: p)
        Self.store(entry, at: p)
        count += 1
        return nil
    }

    /// Replaces the entry of a present key with `transform(entry)`; returns the
    /// old entry, or nil (and changes nothing) when the key is absent.
    @discardableResult
    @inline(__always)
    public func update(_ key: UUIDBytes, _ transform: (IndexEntry) -> IndexEntry) -> IndexEntry? {
        if key.isNil { return nil }
        let (p, found) = probe(key, hash: key.mixedHash)
        guard found else { return nil }
        let old = Self.entry(at: p)
        Self.store(transform(old), at: p)
        return old
    }

    /// Removes `key`; returns its entry, or nil when it was absent.
    ///
    /// Backward-shift deletion (no tombstone slots): the entries after the
    /// freed slot in its probe run move back into it when their home allows,
    /// so every remaining key stays reachable from its home and lookups never
    /// slow down with deletions. Keeps the table in (nearly) hash order.
    @discardableResult
    public func remove(_ key: UUIDBytes) -> IndexEntry? {
        if key.isNil { return nil }
        let (p, found) = probe(key, hash: key.mixedHash)
        guard found else { return nil }
        let old = Self.entry(at: p)
        var hole = (p - slots) / Self.slotSize
        var i = hole
        while true {
            i &+= 1
            if i == capacity { i = 0 }
            let q = slotPointer(i)
            let k = Self.key(at: q)
            if k.isNil { break }
            // The entry at i may move to the hole when its home is not in the
            // cyclic range (hole, i]: it would then be probed past the hole.
            let h = home(k.mixedHash)
            let inRange = hole <= i ? (h > hole && h <= i) : (h > hole || h <= i)
            if !inRange {
                slotPointer(hole).copyMemory(from: q, byteCount: Self.slotSize)
                hole = i
            }
        }
        slotPointer(hole).initializeMemory(as: UInt8.self, repeating: 0, count: Self.slotSize)
        count -= 1
        return old
    }

    /// Doubles the capacity.
    private func grow() { rehash(toCapacity: capacity * 2) }

    /// Moves every key into a new table of `newCapacity` slots. The old table
    /// is walked in slot order, which is hash order, so the new one is written
    /// nearly sequentially.
    private func rehash(toCapacity newCapacity: Int, populateInBackground: Bool = false) {
        let oldSlots = slots, oldCapacity = capacity
        populator?.stop()
        capacity = newCapacity
        threshold = capacity - capacity / 5
        (slots, populator) = Self.allocateSlots(capacity, inBackground: populateInBackground)
        for i in 0..<oldCapacity {
            let p = oldSlots + i * Self.slotSize
            let k = Self.key(at: p)
            if k.isNil { continue }
            let (q, _) = probe(k, hash: k.mixedHash)
            q.copyMemory(from: p, byteCount: Self.slotSize)
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

    /// Calls `body` for every key and entry, in slot order.
    public func forEach(_ body: (UUIDBytes, IndexEntry) throws -> Void) rethrows {
        for i in 0..<capacity {
            let p = slotPointer(i)
            let k = Self.key(at: p)
            if !k.isNil { try body(k, Self.entry(at: p)) }
        }
    }

    /// Bytes allocated for slots (the figure "index bytes per key" divides).
    public var memoryBytes: Int { capacity * Self.slotSize }

    /// Re-sizes the table for 70% load when it is more than half as large
    /// again as that (after a rebuild that reserved for more keys than it
    /// found). Walks in hash order, so it is nearly sequential.
    public func shrinkToFit() {
        let target = Self.capacity(for: count)
        if target < capacity - capacity / 3 { rehash(toCapacity: target) }
    }
}
