import Foundation

/// Applies the sample entries of consecutive checked snapshots to a state, as
/// replaying their segments in order would (`ReplayPipeline` applies their
/// other records first).
///
/// Each snapshot's entries are in hash order, so one snapshot alone writes
/// the index front to back; but a hundred of them applied one after the
/// other sweep the whole table a hundred times, each entry a cache miss. So
/// the table is cut into bands of hash range (`bandBytes` of slots), and for
/// each band every snapshot applies its entries in that range, in segment
/// order: a key's entries all fall in one band, so each key still sees its
/// versions in log order, while the band's slots stay cached.
///
/// A key's later entries (a new version, an acknowledgement) must confirm
/// that the slot with their tag is theirs. Each band keeps a key cache (the
/// UUID beside each slot it set), so that is a load from cache rather than
/// a page fault in the segment's mapping.
///
/// With `parallelEntries` or more entries, two threads apply the bands: one
/// the lower half of the hash range, the other the upper, each in a lane of
/// the index (`SampleIndex.Lane`) holding the slots its keys are homed in.
/// The last band of each half is left out, so that a probe run spilling past
/// a half's bands lands in slots nobody else touches; those two bands are
/// applied afterwards on this thread, as is anything a lane refused (a run
/// reaching the other half, more keys than its budget), from where it was.
struct SnapshotBandApplier {
    let snapshots: [SegmentSnapshot.Checked]
    let state: StoreState
    /// Where the snapshots' segments are: lanes confirm tag matches there.
    let segments: [SegmentInfo]
    let directory: String
    var bandBytes = ReplayPipeline.defaultBandBytes
    var parallelEntries = SnapshotBandApplier.defaultParallelEntries

    /// Entries from which two threads apply them (below it a thread costs
    /// more than it saves).
    static let defaultParallelEntries = 1 << 20
    /// Slots past a band's end its key cache also covers (a probe run that
    /// spills over; the cache is a power of two, usually larger anyway).
    static let bandCacheSpill = 4_096
    /// How many entries ahead the applier prefetches index slots.
    static let prefetchDistance = ReplayPipeline.prefetchDistance

    /// Where applying is: the band (0-based), the snapshot within it, and
    /// each snapshot's next entry.
    struct Cursor {
        var band: Int
        var snapshot = 0
        var entries: [Int]
    }

    /// What the two threads did (nothing when one applied everything).
    struct Outcome {
        /// Entries the two threads applied, each in its half.
        var entriesInParallel = 0
        /// Threads whose lane refused an entry and left the rest of their half.
        var laneRefusals = 0
    }

    func run() throws -> Outcome {
        let bands = max(1, state.index.memoryBytes / bandBytes)
        let width = UInt64.max / UInt64(bands)
        let cacheEntries = SampleIndex.slots(inBytes: bandBytes) + Self.bandCacheSpill
        let total = snapshots.reduce(0) { $0 + $1.entries.count }
        let index = state.index
        index.setKeyCache(entries: cacheEntries)
        defer { index.setKeyCache(entries: 0) }
        var lower = Cursor(band: 0, entries: Array(repeating: 0, count: snapshots.count))
        let half = bands / 2
        guard total >= parallelEntries, half >= 2 else {
            try apply(until: bands, from: &lower, readers: snapshots.map(\.entries), bands: bands, width: width,
                      lane: index.ownLane, counting: state.counters)
            return Outcome()
        }
        // The upper half reads the same files through readers of its own,
        // from the first entry of its first band.
        let upperStart = width &* UInt64(half)
        let upperReaders = snapshots.map { $0.entries.sharingFile() }
        var upper = Cursor(band: half, entries: try upperReaders.map { try $0.firstEntry(hashAtLeast: upperStart) })
        let split = index.homeSlot(ofHash: upperStart)
        // The table must not grow while the lanes fill it: each may add half
        // of what it has room for.
        let room = index.roomBeforeGrowing / 2
        // The lower half runs on this thread, so it confirms as the index's own
        // lane does; the upper half needs a segment reader of its own.
        guard let ownKeyAt = index.keyAt else { preconditionFailure("SampleIndex.keyAt is not set: a tag match cannot be confirmed") }
        let lowerLane = index.makeLane(slots: 0..<split, budget: room, keyAt: ownKeyAt, cacheEntries: cacheEntries)
        let upperLane = index.makeLane(slots: split..<index.slotCount, budget: room,
                                       keyAt: SegmentKeyReader(segments: segments).key(at:), cacheEntries: cacheEntries)
        // Written on every entry by different threads: each on cache lines of its own.
        let counts = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 128)
        defer { counts.deallocate() }
        let lowerCounts = counts.bindMemory(to: StoreState.Counters.self, capacity: 1)
        let upperCounts = (counts + 128).bindMemory(to: StoreState.Counters.self, capacity: 1)
        lowerCounts.initialize(to: .init())
        upperCounts.initialize(to: .init())

        let job = UpperHalf(self, cursor: upper, readers: upperReaders, bands: bands, width: width, lane: upperLane, counts: upperCounts)
        let thread = Thread { job.run() }
        thread.stackSize = 1 << 20
        thread.start()
        var lowerError: Error?
        var lowerRefused = false
        do {
            try apply(until: half - 1, from: &lower, readers: snapshots.map(\.entries), bands: bands, width: width,
                      lane: lowerLane, counting: lowerCounts)
        } catch is SampleIndex.LaneOverflow {
            lowerRefused = true
        } catch {
            lowerError = error
        }
        job.done.wait()
        upper = job.cursor
        var outcome = Outcome()
        outcome.entriesInParallel = lower.entries.reduce(0, +) + zip(upper.entries, job.start).reduce(0) { $0 + $1.0 - $1.1 }
        outcome.laneRefusals = (lowerRefused ? 1 : 0) + (job.refused ? 1 : 0)
        index.absorb(lowerLane)
        index.absorb(upperLane)
        state.absorb(lowerCounts.pointee)
        state.absorb(upperCounts.pointee)
        if let error = lowerError ?? job.error { throw error }

        // Then, on this thread's lane (any slot): the rest of the lower half
        // (its last band, and what its lane refused), then of the upper half.
        try apply(until: half, from: &lower, readers: snapshots.map(\.entries), bands: bands, width: width,
                  lane: index.ownLane, counting: state.counters)
        // The lower half must end where the upper began in every snapshot:
        // entries out of hash order would otherwise be skipped or applied twice.
        if let k = snapshots.indices.first(where: { lower.entries[$0] != job.start[$0] }) {
            throw StepLogError.corruption(path: snapshotPath(k), offset: Int64(FormatConstants.snapshotHeaderSize),
                                          kind: .snapshotEntriesOutOfOrder)
        }
        try apply(until: bands, from: &upper, readers: upperReaders, bands: bands, width: width,
                  lane: index.ownLane, counting: state.counters)
        return outcome
    }

    private func snapshotPath(_ k: Int) -> String {
        Directory.join(directory, SegmentName.snapshotFileName(sequence: snapshots[k].header.sequence))
    }

    /// The upper half's work, on its own thread.
    private final class UpperHalf: @unchecked Sendable {
        let applier: SnapshotBandApplier
        var cursor: Cursor
        let start: [Int]
        let readers: [SnapshotEntryReader]
        let bands: Int, width: UInt64
        let lane: SampleIndex.Lane
        let counts: UnsafeMutablePointer<StoreState.Counters>
        var error: Error?
        /// The lane refused an entry (`SampleIndex.LaneOverflow`).
        var refused = false
        let done = DispatchSemaphore(value: 0)

        init(_ applier: SnapshotBandApplier, cursor: Cursor, readers: [SnapshotEntryReader], bands: Int, width: UInt64,
             lane: SampleIndex.Lane, counts: UnsafeMutablePointer<StoreState.Counters>) {
            self.applier = applier
            self.cursor = cursor
            start = cursor.entries
            self.readers = readers
            self.bands = bands
            self.width = width
            self.lane = lane
            self.counts = counts
        }

        func run() {
            defer { done.signal() }
            do {
                try applier.apply(until: bands - 1, from: &cursor, readers: readers, bands: bands, width: width,
                                  lane: lane, counting: counts)
            } catch is SampleIndex.LaneOverflow {
                refused = true
            } catch {
                self.error = error
            }
        }
    }

    /// Applies bands `cursor.band ..< end`, from `cursor`, on `lane`. When an
    /// entry throws (a lane's overflow, corruption), `cursor` is left at that
    /// entry, which was not applied.
    func apply(until end: Int, from cursor: inout Cursor, readers: [SnapshotEntryReader], bands: Int, width: UInt64,
               lane: SampleIndex.Lane, counting counts: UnsafeMutablePointer<StoreState.Counters>) throws {
        let distance = Self.prefetchDistance
        let index = state.index
        // Each entry's hash, computed once, when its slot is prefetched
        // (`distance` entries ahead); ring slot i % ringSize.
        let ringSize = 32
        precondition(distance < ringSize)
        let hashes = UnsafeMutablePointer<UInt64>.allocate(capacity: ringSize)
        defer { hashes.deallocate() }
        while cursor.band < end {
            let bandEnd = cursor.band == bands - 1 ? UInt64.max : width &* UInt64(cursor.band + 1)
            let lastBand = cursor.band == bands - 1
            while cursor.snapshot < readers.count {
                let k = cursor.snapshot
                let reader = readers[k]
                let base = snapshots[k].header.basePosition
                var i = cursor.entries[k]
                defer { cursor.entries[k] = i }
                bandLoop: while i < reader.count {
                    if i >= reader.windowEnd || i < reader.windowStart { try reader.load(from: i) }
                    // The entries of this band that are in the window.
                    let entries = reader.window
                    let first = reader.windowStart, last = reader.windowEnd
                    for j in i..<min(last, i &+ distance) {
                        let key = SegmentSnapshot.SampleEntry.uuid(in: entries, index: j &- first)
                        hashes[j & (ringSize - 1)] = key.mixedHash
                        index.prefetch(key, mixedHash: hashes[j & (ringSize - 1)])
                    }
                    while i < last {
                        let entry = SegmentSnapshot.SampleEntry(loadingFrom: entries, index: i &- first)
                        let key = entry.uuid
                        let hash = hashes[i & (ringSize - 1)]
                        if !lastBand && hash >= bandEnd { break bandLoop }
                        if i &+ distance < last {
                            let ahead = SegmentSnapshot.SampleEntry.uuid(in: entries, index: i &+ distance &- first)
                            let aheadHash = ahead.mixedHash
                            hashes[(i &+ distance) & (ringSize - 1)] = aheadHash
                            index.prefetch(ahead, mixedHash: aheadHash)
                        }
                        if key.isNil {
                            // No writer indexes the nil UUID: a snapshot holding it
                            // was not written by this engine (found by fuzzing: it
                            // trapped in the index). One line, not a crash.
                            throw StepLogError.corruption(path: snapshotPath(k), offset: SegmentSnapshot.fileOffset(ofEntry: i),
                                                          kind: .snapshotEntryNilUUID(entry: i))
                        }
                        if entry.hasVersion {
                            let offset = UInt64(entry.offset)
                            if offset < UInt64(FormatConstants.segmentHeaderSizeV1) {
                                // No record starts inside a segment's header; at offset 0 of
                                // the first segment the position would be 0, the index's empty
                                // slot (found by fuzzing: it trapped in the index).
                                throw StepLogError.corruption(path: snapshotPath(k), offset: SegmentSnapshot.fileOffset(ofEntry: i),
                                                              kind: .snapshotEntryInHeader(entry: i, offset: offset))
                            }
                            try state.applyVersion(key, IndexEntry(position: LogPosition(base + offset), synced: entry.isSynced,
                                                                   tombstone: entry.isTombstone, origin: entry.origin),
                                                   in: lane, mixedHash: hash, counting: counts)
                        } else if entry.isRemoved {
                            try state.applyRemoved(key, in: lane, mixedHash: hash, counting: counts)
                        } else if entry.isSynced {
                            try state.applyAcknowledged(key, in: lane, mixedHash: hash, counting: counts)
                        } else if entry.isUnsynced {
                            try state.applyUnacknowledged(key, in: lane, mixedHash: hash, counting: counts)
                        }
                        i &+= 1
                    }
                }
                cursor.snapshot += 1
            }
            cursor.band += 1
            cursor.snapshot = 0
        }
    }
}
