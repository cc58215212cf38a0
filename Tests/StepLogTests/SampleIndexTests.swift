import Foundation
import Testing
@testable import StepLog

/// The index against a Dictionary doing the same operations: every key the
/// model holds is found with the model's entry, and no other key is.
@Suite struct SampleIndexTests {
    private static func entry(_ n: UInt64, synced: Bool = false) -> IndexEntry {
        IndexEntry(position: LogPosition(n & FormatConstants.maxPosition), synced: synced)
    }

    private static func randomKey(_ rng: inout SeededGenerator) -> UUIDBytes {
        var key = UUIDBytes(high: rng.next(), low: rng.next())
        if key.isNil { key.low = 1 }
        return key
    }

    private static func expectSame(_ index: SampleIndex, _ model: [UUIDBytes: IndexEntry]) {
        #expect(index.count == model.count)
        var seen = 0
        index.forEach { key, entry in
            seen += 1
            #expect(model[key] == entry)
        }
        #expect(seen == model.count)
        for (key, entry) in model { #expect(index.find(key) == entry) }
    }

    @Test func matchesDictionaryThroughGrowthUpdatesAndShrink() {
        var rng = SeededGenerator(seed: 11)
        let index = SampleIndex()
        var model: [UUIDBytes: IndexEntry] = [:]
        var keys: [UUIDBytes] = []
        for step in 0..<60_000 {
            let roll = rng.next() % 10
            if roll < 7 || keys.isEmpty {
                let key = Self.randomKey(&rng)
                let entry = Self.entry(UInt64(step))
                #expect(index.set(key, entry) == model[key])
                model[key] = entry
                keys.append(key)
            } else if roll < 9 {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                let entry = Self.entry(UInt64(step), synced: true)
                #expect(index.set(key, entry) == model[key])
                model[key] = entry
            } else {
                let key = keys[Int(rng.next() % UInt64(keys.count))]
                let old = index.update(key) { $0.withSynced(false) }
                #expect(old == model[key])
                model[key] = model[key]?.withSynced(false)
            }
        }
        // Absent keys stay absent, and update() of one changes nothing.
        for _ in 0..<1_000 {
            let key = Self.randomKey(&rng)
            if model[key] == nil {
                #expect(index.find(key) == nil)
                #expect(index.update(key) { $0 } == nil)
            }
        }
        Self.expectSame(index, model)
        #expect(index.memoryBytes <= 55 * index.count, "grown key by key: at most twice the 80%-load size")

        // Over-reserving then shrinking keeps every key and returns the memory.
        index.reserve(model.count * 4)
        Self.expectSame(index, model)
        let reserved = index.memoryBytes
        index.shrinkToFit()
        #expect(index.memoryBytes < reserved / 2)
        #expect(index.memoryBytes <= SampleIndex.slotSize * SampleIndex.capacity(for: index.count))
        Self.expectSame(index, model)
    }

    @Test func reservedForKnownSizeCostsAboutThirtyOneBytesPerKey() {
        // The capacity need not be a power of two, so a rebuild of known size
        // (what opening a store does) pays 70% load, not up to 2x that.
        var rng = SeededGenerator(seed: 12)
        let keys = 300_000
        let index = SampleIndex()
        index.reserve(keys) // 9 MB: a mapping faulted in on another thread while we fill it
        let before = index.memoryBytes
        for i in 0..<keys { index.set(Self.randomKey(&rng), Self.entry(UInt64(i))) }
        #expect(index.memoryBytes == before, "a reserved index never rehashes")
        let perKey = Double(index.memoryBytes) / Double(keys)
        #expect(perKey >= 31 && perKey < 32, "\(perKey) bytes per key")
        // Growing past the reservation stops the populator before unmapping.
        for i in 0..<(keys / 2) { index.set(Self.randomKey(&rng), Self.entry(UInt64(i))) }
        #expect(index.count == keys + keys / 2)
        #expect(index.memoryBytes > before)
    }

    @Test func removalKeepsEveryOtherKeyReachable() {
        // A full table (79% load, long probe runs, runs that wrap from the last
        // slot to the first) loses keys in random order and gains new ones:
        // after each step every key left is found, every key removed is not.
        var rng = SeededGenerator(seed: 14)
        let index = SampleIndex()
        let capacity = SampleIndex.capacity(for: 0)
        var model: [UUIDBytes: IndexEntry] = [:]
        var keys: [UUIDBytes] = []
        // Keys homed in the last slots, so that runs wrap.
        while keys.count < 6 {
            let key = Self.randomKey(&rng)
            if key.mixedHash.multipliedFullWidth(by: UInt64(capacity)).high >= UInt64(capacity - 2) { keys.append(key) }
        }
        while keys.count < capacity * 79 / 100 { keys.append(Self.randomKey(&rng)) }
        for (i, key) in keys.enumerated() {
            index.set(key, Self.entry(UInt64(i)))
            model[key] = Self.entry(UInt64(i))
        }
        #expect(index.memoryBytes == capacity * SampleIndex.slotSize, "no growth: the table stays full")
        keys.shuffle(using: &rng)
        for (step, key) in keys.enumerated() {
            if step % 3 == 2 {
                // Put a fresh key back in now and then.
                let fresh = Self.randomKey(&rng)
                index.set(fresh, Self.entry(UInt64(step)))
                model[fresh] = Self.entry(UInt64(step))
            }
            #expect(index.remove(key) == model.removeValue(forKey: key))
            #expect(index.remove(key) == nil)
            #expect(index.find(key) == nil)
            if step % 50 == 0 { Self.expectSame(index, model) }
        }
        Self.expectSame(index, model)
        #expect(index.remove(UUIDBytes(high: 0, low: 0)) == nil && index.find(UUIDBytes(high: 0, low: 0)) == nil)
    }

    @Test func probesWrapFromTheLastSlotToTheFirst() {
        // Keys whose home is the last slot of a 1,024-slot table: all but one
        // must wrap around to slot 0 and onwards, and still be found.
        var rng = SeededGenerator(seed: 13)
        let index = SampleIndex()
        let capacity = UInt64(SampleIndex.capacity(for: 0))
        var atEnd: [UUIDBytes] = []
        while atEnd.count < 8 {
            let key = Self.randomKey(&rng)
            if key.mixedHash.multipliedFullWidth(by: capacity).high == capacity - 1 { atEnd.append(key) }
        }
        var model: [UUIDBytes: IndexEntry] = [:]
        for (i, key) in atEnd.enumerated() {
            index.set(key, Self.entry(UInt64(i)))
            model[key] = Self.entry(UInt64(i))
        }
        #expect(index.memoryBytes == Int(capacity) * SampleIndex.slotSize, "no growth, so the probes wrapped")
        Self.expectSame(index, model)
    }
}
