/// The in-memory map from sample UUID to its latest version (`IndexEntry`).
///
/// An open-addressing hash table with linear probing, split into 4,096 shards by
/// the top bits of the UUID's hash. Each slot is 22 bytes: the 16-byte UUID
/// plus a 48-bit entry, kept in separate arrays (keys are probed; entries are
/// touched once found). The nil UUID marks an empty slot, which is why samples
/// may not use it. Shards grow independently, so a growth step rehashes 1/4096
/// of the table, and bulk loads and rebuilds can work shard by shard.
///
/// Not thread-safe: the store serializes access.
public final class SampleIndex {
    public static let shardBits = 12
    public static let shardCount = 1 << shardBits
    /// Bytes of one slot: the key and the 48-bit entry.
    public static let bytesPerSlot = MemoryLayout<UUIDBytes>.stride + 4 + 2
    static let minimumShardCapacity = 16

    struct Shard {
        var keys: UnsafeMutablePointer<UUIDBytes>? = nil
        var low: UnsafeMutablePointer<UInt32>? = nil
        var high: UnsafeMutablePointer<UInt16>? = nil
        var capacity = 0
        var count = 0

        @inline(__always) var growthThreshold: Int { capacity - capacity / 5 } // 80% load

        static func allocate(capacity: Int) -> Shard {
            var s = Shard()
            s.capacity = capacity
            s.keys = .allocate(capacity: capacity)
            s.keys!.initialize(repeating: UUIDBytes(high: 0, low: 0), count: capacity)
            s.low = .allocate(capacity: capacity)
            s.high = .allocate(capacity: capacity)
            return s
        }

        func deallocate() {
            keys?.deallocate()
            low?.deallocate()
            high?.deallocate()
        }

        @inline(__always) func entry(at slot: Int) -> IndexEntry {
            IndexEntry(rawValue: UInt64(low![slot]) | UInt64(high![slot]) << 32)
        }

        @inline(__always) func store(_ entry: IndexEntry, at slot: Int) {
            low![slot] = UInt32(truncatingIfNeeded: entry.rawValue)
            high![slot] = UInt16(truncatingIfNeeded: entry.rawValue >> 32)
        }

        /// The slot holding `key`, or the empty slot where it would go.
        @inline(__always) func probe(_ key: UUIDBytes, hash: UInt64) -> (slot: Int, found: Bool) {
            let mask = capacity - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            let keys = self.keys!
            while true {
                let k = keys[slot]
                if k.low == key.low && k.high == key.high { return (slot, true) }
                if k.low == 0 && k.high == 0 { return (slot, false) }
                slot = (slot + 1) & mask
            }
        }
    }

    private let shards: UnsafeMutablePointer<Shard>
    /// Number of keys.
    public private(set) var count = 0

    public init() {
        shards = .allocate(capacity: Self.shardCount)
        shards.initialize(repeating: Shard(), count: Self.shardCount)
    }

    deinit {
        for i in 0..<Self.shardCount { shards[i].deallocate() }
        shards.deallocate()
    }

    @inline(__always) static func shardIndex(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash >> UInt64(64 - shardBits)) }

    /// The entry for `key`, if present.
    @inline(__always)
    public func find(_ key: UUIDBytes) -> IndexEntry? {
        let hash = key.mixedHash
        let shard = shards[Self.shardIndex(hash)]
        guard shard.capacity > 0 else { return nil }
        let (slot, found) = shard.probe(key, hash: hash)
        return found ? shard.entry(at: slot) : nil
    }

    /// Inserts or replaces the entry for `key`; returns the previous entry.
    @discardableResult
    @inline(__always)
    public func set(_ key: UUIDBytes, _ entry: IndexEntry) -> IndexEntry? {
        precondition(!key.isNil, "the nil UUID cannot be indexed")
        let hash = key.mixedHash
        let s = Self.shardIndex(hash)
        if shards[s].count + 1 > shards[s].growthThreshold { grow(s) }
        let shard = shards[s]
        let (slot, found) = shard.probe(key, hash: hash)
        if found {
            let old = shard.entry(at: slot)
            shard.store(entry, at: slot)
            return old
        }
        shard.keys![slot] = key
        shard.store(entry, at: slot)
        shards[s].count += 1
        count += 1
        return nil
    }

    /// Replaces the entry of a present key with `transform(entry)`; returns the
    /// old entry, or nil (and changes nothing) when the key is absent.
    @discardableResult
    @inline(__always)
    public func update(_ key: UUIDBytes, _ transform: (IndexEntry) -> IndexEntry) -> IndexEntry? {
        let hash = key.mixedHash
        let shard = shards[Self.shardIndex(hash)]
        guard shard.capacity > 0 else { return nil }
        let (slot, found) = shard.probe(key, hash: hash)
        guard found else { return nil }
        let old = shard.entry(at: slot)
        shard.store(transform(old), at: slot)
        return old
    }

    private func grow(_ s: Int) {
        let old = shards[s]
        let newCapacity = max(Self.minimumShardCapacity, old.capacity * 2)
        var fresh = Shard.allocate(capacity: newCapacity)
        if old.capacity > 0 {
            for i in 0..<old.capacity {
                let k = old.keys![i]
                if k.isNil { continue }
                let (slot, _) = fresh.probe(k, hash: k.mixedHash)
                fresh.keys![slot] = k
                fresh.low![slot] = old.low![i]
                fresh.high![slot] = old.high![i]
            }
        }
        fresh.count = old.count
        old.deallocate()
        shards[s] = fresh
    }

    /// Sizes every shard for `expectedKeys` keys in total, so a rebuild of known
    /// size never rehashes. Call on an empty index.
    public func reserve(_ expectedKeys: Int) {
        precondition(count == 0, "reserve is for an empty index")
        let perShard = expectedKeys / Self.shardCount + 1
        var capacity = Self.minimumShardCapacity
        while capacity - capacity / 5 < perShard + perShard / 16 + 4 { capacity *= 2 }
        for s in 0..<Self.shardCount where shards[s].capacity < capacity {
            shards[s].deallocate()
            shards[s] = Shard.allocate(capacity: capacity)
        }
    }

    /// Calls `body` for every key and entry, shard by shard (no defined order).
    public func forEach(_ body: (UUIDBytes, IndexEntry) throws -> Void) rethrows {
        for s in 0..<Self.shardCount {
            let shard = shards[s]
            for i in 0..<shard.capacity {
                let k = shard.keys![i]
                if !k.isNil { try body(k, shard.entry(at: i)) }
            }
        }
    }

    /// Bytes allocated for slots (the figure "index bytes per key" divides).
    public var memoryBytes: Int {
        var slots = 0
        for s in 0..<Self.shardCount { slots += shards[s].capacity }
        return slots * Self.bytesPerSlot + Self.shardCount * MemoryLayout<Shard>.stride
    }

    /// Forgets every key and frees the slots.
    public func removeAll() {
        for s in 0..<Self.shardCount {
            shards[s].deallocate()
            shards[s] = Shard()
        }
        count = 0
    }
}
