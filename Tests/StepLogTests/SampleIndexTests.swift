import Foundation
import Testing
@testable import StepLog

/// The index against a Dictionary doing the same operations: every key the
/// model holds is found with the model's entry, and no other key is. The
/// index keeps no UUID, so each test plays the log: a table from position to
/// the UUID of the record there, which `keyAt` reads as the store reads its
/// records.
@Suite struct SampleIndexTests {
    /// Positions handed out in order (never 0, which marks an empty slot),
    /// each remembered with the UUID written there.
    final class Log {
        var keys: [UInt64: UUIDBytes] = [:]
        var next: UInt64 = 4096

        func entry(_ key: UUIDBytes, synced: Bool = false, tombstone: Bool = false) -> IndexEntry {
            next += 1
            keys[next] = key
            return IndexEntry(position: LogPosition(next), synced: synced, tombstone: tombstone,
                              origin: tombstone ? .unspecified : SampleOrigin(rawValue: UInt8(next % 4))!)
        }

        func attach(_ index: SampleIndex) {
            index.keyAt = { [unowned self] position in self.keys[position.rawValue]! }
        }
    }

    private static func randomKey(_ rng: inout SeededGenerator) -> UUIDBytes {
        var key = UUIDBytes(high: rng.next(), low: rng.next())
        if key.isNil { key.low = 1 }
        return key
    }

    private static func expectSame(_ index: SampleIndex, _ log: Log, _ model: [UUIDBytes: IndexEntry]) throws {
        #expect(index.count == model.count)
        var seen = 0
        index.forEach { entry in
            seen += 1
            let key = log.keys[entry.position.rawValue]!
            #expect(model[key] == entry)
            #expect(index.entry(key, at: entry.position) == entry)
        }
        #expect(seen == model.count)
        for (key, entry) in model { #expect(try index.find(key) == entry) }
    }

    /// Random inserts, updates and removals against the model.
    private static func churn(_ index: SampleIndex, _ log: Log, steps: Int, seed: UInt64) throws -> [UUIDBytes: IndexEntry] {
        var rng = SeededGenerator(seed: seed)
        var model: [UUIDBytes: IndexEntry] = [:]
        var keys: [UUIDBytes] = []
        for _ in 0..<steps {
            let roll = rng.next() % 10
            if roll < 6 || keys.isEmpty {
                let key = Self.randomKey(&rng)
                let entry = log.entry(key)
                #expect(try index.set(key, entry) == model[key])
                model[key] = entry
                keys.append(key)
            } else if roll < 8 {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                let entry = log.entry(key, synced: true)
                #expect(try index.set(key, entry) == model[key])
                model[key] = entry
            } else if roll < 9 {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                let old = try index.update(key) { $0.withSynced(false) }
                #expect(old == model[key])
                model[key] = model[key]?.withSynced(false)
            } else {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                #expect(try index.remove(key) == model.removeValue(forKey: key))
            }
        }
        // Absent keys stay absent, and update() and remove() of one change nothing.
        for _ in 0..<1_000 {
            let key = Self.randomKey(&rng)
            if model[key] == nil {
                #expect(try index.find(key) == nil)
                #expect(try index.update(key) { $0 } == nil)
                #expect(try index.remove(key) == nil)
            }
        }
        return model
    }

    @Test func matchesDictionaryThroughGrowthUpdatesAndShrink() throws {
        let log = Log()
        let index = SampleIndex()
        log.attach(index)
        let model = try Self.churn(index, log, steps: 60_000, seed: 11)
        try Self.expectSame(index, log, model)
        #expect(index.memoryBytes <= 28 * index.count, "grown key by key: at most twice the 87.5%-load size")
        // Distinct random UUIDs almost never share a 48-bit tag: looking up
        // absent ones (what inserting does) reads no record.
        var rng = SeededGenerator(seed: 17)
        let reads = index.confirmingReads
        for _ in 0..<20_000 { #expect(try index.find(Self.randomKey(&rng)) == nil) }
        #expect(index.confirmingReads - reads < 3, "\(index.confirmingReads - reads) records read for absent keys")

        // Over-reserving then shrinking keeps every key and returns the memory.
        index.reserve(model.count * 4)
        try Self.expectSame(index, log, model)
        let reserved = index.memoryBytes
        index.shrinkToFit()
        #expect(index.memoryBytes < reserved / 2)
        #expect(index.memoryBytes <= SampleIndex.slotSize * SampleIndex.capacity(for: index.count))
        try Self.expectSame(index, log, model)
    }

    @Test func everyKeySharingOneTagIsStillExact() throws {
        // A hash that gives every UUID the same tag and home: each lookup walks
        // one run and must read records to tell its keys apart.
        let log = Log()
        let index = SampleIndex(hash: { _ in 0x1234_5678_9ABC_DEF0 })
        log.attach(index)
        let model = try Self.churn(index, log, steps: 3_000, seed: 15)
        try Self.expectSame(index, log, model)
        #expect(index.confirmingReads > 10_000, "tag matches were confirmed by reading records")
        // Knowing the position needs no read, even here.
        let before = index.confirmingReads
        for (key, entry) in model { #expect(index.entry(key, at: entry.position) == entry) }
        #expect(index.confirmingReads == before)
        // A position that is not the key's current version is not its entry.
        if let (key, entry) = model.first {
            #expect(index.entry(key, at: LogPosition(entry.position.rawValue + 1_000_000)) == nil)
        }
    }

    @Test func theKeyCacheConfirmsFromMemoryAndIsNeverWrong() throws {
        // With the cache on, tag matches on slots set since are confirmed
        // without reading; a slot changed behind the cache's back (its entry
        // no longer the one cached) is read again, not trusted.
        let log = Log()
        let index = SampleIndex(hash: { $0.high & 1 == 0 ? 0xAAAA_0000_0000_0000 : 0x5555_0000_0000_0000 })
        log.attach(index)
        index.setKeyCache(entries: 4096)
        var rng = SeededGenerator(seed: 16)
        var model: [UUIDBytes: IndexEntry] = [:]
        let keys = (0..<200).map { _ in Self.randomKey(&rng) }
        for key in keys {
            let entry = log.entry(key)
            try index.set(key, entry)
            model[key] = entry
        }
        let reads = index.confirmingReads
        for key in keys { #expect(try index.find(key) == model[key]) }
        #expect(index.confirmingReads == reads, "every confirmation came from the cache")
        index.setKeyCache(entries: 0)
        for key in keys.prefix(10) {
            model[key] = log.entry(key, synced: true)
            try index.set(key, model[key]!)
        }
        try Self.expectSame(index, log, model)
    }

    @Test func twoLanesFillTheirHalvesAtOnceAndRefuseWhatLeavesThem() throws {
        // Opening a large store fills the index on two threads, each in a
        // lane holding the slots its keys are homed in. A lane refuses, and
        // leaves unchanged, what would leave its slots: a key homed outside,
        // a probe run reaching its limit (an insert, a removal's backward
        // shift), more keys than its budget. The refused operations, done
        // afterwards on the index's own lane, give the model's contents.
        let log = Log()
        let index = SampleIndex(expectedKeys: 40_000)
        log.attach(index)
        let split = index.homeSlot(ofHash: 1 << 63)
        var rng = SeededGenerator(seed: 23)
        let keys = (0..<30_000).map { _ in Self.randomKey(&rng) }
        let entries = keys.map { log.entry($0) }
        var model: [UUIDBytes: IndexEntry] = [:]
        struct UnsafeSendable<T>: @unchecked Sendable { let value: T; init(_ value: T) { self.value = value } }
        final class Half: @unchecked Sendable {
            let lane: SampleIndex.Lane
            var refused: [Int] = []
            init(_ lane: SampleIndex.Lane) { self.lane = lane }
        }
        let halves = [Half(index.makeLane(slots: 0..<split, budget: .max, keyAt: { log.keys[$0.rawValue]! }, cacheEntries: 0)),
                      Half(index.makeLane(slots: split..<index.slotCount, budget: 14_000, keyAt: { log.keys[$0.rawValue]! }, cacheEntries: 0))]
        let work = UnsafeSendable((index, keys, entries))
        DispatchQueue.concurrentPerform(iterations: 2) { h in
            let (index, keys, entries) = work.value
            // Each half tries every key: the other half's are refused (homed outside).
            for i in keys.indices {
                do {
                    try index.set(keys[i], entries[i], in: halves[h].lane, mixedHash: keys[i].mixedHash)
                } catch {
                    halves[h].refused.append(i)
                }
            }
        }
        for half in halves { index.absorb(half.lane) }
        let done = Set(0..<keys.count).subtracting(Set(halves[0].refused).intersection(halves[1].refused))
        #expect(halves[1].refused.count > keys.count / 2, "the upper lane's budget ran out")
        for i in done { model[keys[i]] = entries[i] }
        #expect(index.count == model.count)
        for i in Set(halves[0].refused).intersection(halves[1].refused).sorted() {
            try index.set(keys[i], entries[i])
            model[keys[i]] = entries[i]
        }
        try Self.expectSame(index, log, model)

        // A lane ending inside a probe run: inserts and removals reaching its
        // limit are refused and change nothing.
        let lane = index.makeLane(slots: 0..<split, budget: .max, keyAt: { log.keys[$0.rawValue]! }, cacheEntries: 64)
        var insertsRefused = 0, removalsRefused = 0
        for key in keys where index.homeSlot(ofHash: key.mixedHash) < split {
            let entry = log.entry(key, synced: true)
            do {
                #expect(try index.set(key, entry, in: lane, mixedHash: key.mixedHash) == model[key])
                model[key] = entry
            } catch is SampleIndex.LaneOverflow {
                insertsRefused += 1
            }
        }
        var near = 0
        while near < 300 {
            let key = Self.randomKey(&rng)
            let home = index.homeSlot(ofHash: key.mixedHash)
            guard home >= split - 40 && home < split else { continue }
            near += 1
            let entry = log.entry(key)
            let tight = index.makeLane(slots: 0..<split, budget: .max, keyAt: { log.keys[$0.rawValue]! }, cacheEntries: 0)
            do {
                try index.set(key, entry, in: tight, mixedHash: key.mixedHash)
                model[key] = entry
                do {
                    try index.remove(key, in: tight, mixedHash: key.mixedHash)
                    model[key] = nil
                } catch is SampleIndex.LaneOverflow {
                    removalsRefused += 1
                }
            } catch is SampleIndex.LaneOverflow {
                insertsRefused += 1
            }
            index.absorb(tight)
        }
        index.absorb(lane)
        #expect(insertsRefused > 0)
        #expect(removalsRefused > 0)
        try Self.expectSame(index, log, model)
    }

    @Test func reservedForKnownSizeCostsFifteenBytesPerKey() throws {
        // The capacity need not be a power of two, so a rebuild of known size
        // (what opening a store does) pays 80% load, not up to 2x that.
        var rng = SeededGenerator(seed: 12)
        let keys = 300_000
        let log = Log()
        let index = SampleIndex()
        log.attach(index)
        index.reserve(keys) // 4.5 MB: a mapping faulted in on another thread while we fill it
        let before = index.memoryBytes
        for _ in 0..<keys {
            let key = Self.randomKey(&rng)
            try index.set(key, log.entry(key))
        }
        #expect(index.memoryBytes == before, "a reserved index never rehashes")
        let perKey = Double(index.memoryBytes) / Double(keys)
        #expect(perKey >= 15 && perKey < 15.1, "\(perKey) bytes per key")
        // Growing past the reservation stops the populator before unmapping.
        for _ in 0..<(keys / 2) {
            let key = Self.randomKey(&rng)
            try index.set(key, log.entry(key))
        }
        #expect(index.count == keys + keys / 2)
        #expect(index.memoryBytes > before)
    }

    @Test func removalKeepsEveryOtherKeyReachable() throws {
        // A full table (86% load, long probe runs, runs that wrap from the last
        // slot to the first) loses keys in random order and gains new ones:
        // after each step every key left is found, every key removed is not.
        var rng = SeededGenerator(seed: 14)
        let log = Log()
        let index = SampleIndex()
        log.attach(index)
        let capacity = SampleIndex.capacity(for: 0)
        var model: [UUIDBytes: IndexEntry] = [:]
        var keys: [UUIDBytes] = []
        // Keys homed in the last slots, so that runs wrap.
        while keys.count < 6 {
            let key = Self.randomKey(&rng)
            if (index.tag(key) << SampleIndex.tagShift).multipliedFullWidth(by: UInt64(capacity)).high >= UInt64(capacity - 2) { keys.append(key) }
        }
        while keys.count < capacity * 86 / 100 { keys.append(Self.randomKey(&rng)) }
        for key in keys {
            let entry = log.entry(key)
            try index.set(key, entry)
            model[key] = entry
        }
        #expect(index.memoryBytes == capacity * SampleIndex.slotSize, "no growth: the table stays full")
        keys.shuffle(using: &rng)
        for (step, key) in keys.enumerated() {
            if step % 3 == 2 {
                // Put a fresh key back in now and then.
                let fresh = Self.randomKey(&rng)
                let entry = log.entry(fresh)
                try index.set(fresh, entry)
                model[fresh] = entry
            }
            #expect(try index.remove(key) == model.removeValue(forKey: key))
            #expect(try index.remove(key) == nil)
            #expect(try index.find(key) == nil)
            if step % 50 == 0 { try Self.expectSame(index, log, model) }
        }
        try Self.expectSame(index, log, model)
    }

    @Test func probesWrapFromTheLastSlotToTheFirst() throws {
        // Keys whose home is the last slot of a 1,024-slot table: all but one
        // must wrap around to slot 0 and onwards, and still be found.
        var rng = SeededGenerator(seed: 13)
        let log = Log()
        let index = SampleIndex()
        log.attach(index)
        let capacity = UInt64(SampleIndex.capacity(for: 0))
        var atEnd: [UUIDBytes] = []
        while atEnd.count < 8 {
            let key = Self.randomKey(&rng)
            if (index.tag(key) << SampleIndex.tagShift).multipliedFullWidth(by: capacity).high == capacity - 1 { atEnd.append(key) }
        }
        var model: [UUIDBytes: IndexEntry] = [:]
        for key in atEnd {
            let entry = log.entry(key)
            try index.set(key, entry)
            model[key] = entry
        }
        #expect(index.memoryBytes == Int(capacity) * SampleIndex.slotSize, "no growth, so the probes wrapped")
        try Self.expectSame(index, log, model)
    }

    @Test func anEntrysFiftyBitsAndATagsFortySixShareASlotWithoutTouching() throws {
        // Entries with their high bits set (positions near the greatest,
        // synced or a tombstone, origin bits 11) beside tags of all ones and all zeros,
        // and the reverse: each comes back exactly, and stays reachable
        // through growth and removals.
        let hashes: [UUIDBytes: UInt64] = [UUIDBytes(high: 1, low: 1): .max, UUIDBytes(high: 2, low: 2): 0,
                                           UUIDBytes(high: 3, low: 3): 0x5555_5555_5555_5555, UUIDBytes(high: 4, low: 4): 0xAAAA_AAAA_AAAA_AAAA]
        let keys = hashes.keys.sorted { $0.high < $1.high }
        let top = LogPosition(FormatConstants.maxPosition)
        let entries = [IndexEntry(position: top, synced: true, origin: .live), IndexEntry(position: LogPosition(1), synced: false),
                       IndexEntry.tombstone(at: LogPosition(top.rawValue - 1)), IndexEntry(position: LogPosition(0x2AAA_AAAA_AAAA), synced: true, origin: .mock)]
        #expect(entries.map(\.origin) == [.live, .unspecified, .unspecified, .mock])
        #expect(entries.map(\.position) == [top, LogPosition(1), LogPosition(top.rawValue - 1), LogPosition(0x2AAA_AAAA_AAAA)])
        #expect(entries.map(\.isSynced) == [true, false, false, true] && entries.map(\.isTombstone) == [false, false, true, false])
        let index = SampleIndex(hash: { hashes[$0]! })
        index.keyAt = { position in keys[entries.firstIndex { $0.position == position }!] }
        for (key, entry) in zip(keys, entries) { try index.set(key, entry) }
        for (key, entry) in zip(keys, entries) { #expect(try index.find(key) == entry) }
        index.reserve(10_000) // a rehash moves slots by their tags alone
        for (key, entry) in zip(keys, entries) {
            #expect(try index.find(key) == entry)
            #expect(index.entry(key, at: entry.position) == entry)
        }
        #expect(try index.remove(keys[1]) == entries[1])
        for (key, entry) in zip(keys, entries) where key != keys[1] { #expect(try index.find(key) == entry) }
    }
}
