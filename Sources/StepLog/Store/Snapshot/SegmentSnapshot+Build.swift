#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentSnapshot {
    // MARK: Building from a segment

    /// Reads a sealed segment and computes its snapshot. Throws on any damage
    /// (a snapshot is only ever made of a clean segment). `keysAfter` is the
    /// index's size after the segment, which the caller knows.
    public static func build(from segment: SegmentInfo, keysAfter: Int) throws -> SegmentSnapshot {
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        fd.adviseSequential()
        // Every sample event in log order, as parallel arrays; put in
        // (hash, uuid) order by a stable bucket sort, so each sample's events
        // stay in log order, and collapsed per uuid below. No Dictionary: its
        // hashing (SipHash) cost more than the sort.
        var hashes: [UInt64] = []
        var uuids: [UUIDBytes] = []
        var offsets: [UInt32] = []
        var eventFlags: [UInt8] = []
        func event(_ uuid: UUIDBytes, _ offset: UInt32, _ flags: UInt8) {
            hashes.append(uuid.mixedHash)
            uuids.append(uuid)
            offsets.append(offset)
            eventFlags.append(flags)
        }
        var others: [OtherRecord] = []
        var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart)
        while let step = try reader.nextRecord(version: segment.header.version) {
            switch step {
            case .damage(let offset, let damage):
                throw StepLogError.corruption(path: segment.path, offset: offset, kind: .damage(damage))
            case .malformed(let offset, let problem):
                throw StepLogError.corruption(path: segment.path, offset: offset, kind: .malformedRecord(problem))
            case .record(let record, let offset, _):
                switch Contribution.of(record) {
                case .version(let uuid, let flags):
                    event(uuid, UInt32(offset), flags)
                case .acknowledgements(let ids):
                    for i in 0..<ids.count { event(ids.uuid(i), 0, FormatConstants.snapshotEntrySynced) }
                case .unacknowledgements(let entries):
                    for e in entries.rejections { event(UUIDBytes(e.id), 0, FormatConstants.snapshotEntryUnsynced) }
                    // Its rejections (and the ends of rejections) are applied with the other records.
                    others.append(OtherRecord(offset: UInt32(offset), type: record.type.rawValue, payload: Array(record.payload)))
                case .verbatim:
                    others.append(OtherRecord(offset: UInt32(offset), type: record.type.rawValue, payload: Array(record.payload)))
                case .nothing:
                    break
                }
            }
        }
        let order = bucketOrder(hashes: hashes, uuids: uuids)
        var samples: [SampleEntry] = []
        samples.reserveCapacity(order.count)
        var i = 0
        while i < order.count {
            // The events of one sample, in log order, folded into its final effect.
            var entry = SampleEntry(uuid: uuids[Int(order[i])], offset: 0, flags: 0)
            var j = i
            while j < order.count && uuids[Int(order[j])] == entry.uuid {
                let e = Int(order[j])
                entry.fold(offset: offsets[e], flags: eventFlags[e])
                j += 1
            }
            samples.append(entry)
            i = j
        }
        return SegmentSnapshot(sequence: segment.sequence, basePosition: segment.basePosition, segmentSize: UInt64(segment.size),
                               tailChecksum: try tailChecksum(fd, dataStart: segment.dataStart, size: segment.size), keysAfter: UInt64(keysAfter),
                               samples: samples, others: others)
    }

    /// What one record puts in its segment's snapshot: a `RecordView`
    /// handler, shared by snapshots built from a segment and those of
    /// compaction's outputs, which are collected as the outputs are written.
    enum Contribution {
        /// An event of a sample: a version or tombstone, with the entry flags it sets.
        case version(UUIDBytes, flags: UInt8)
        /// The acknowledgement of each UUID (an event with the synced flag alone).
        case acknowledgements(AcknowledgedPayload)
        /// Each UUID's acknowledgement lost (an event with the unsynced flag
        /// alone); the record is also carried as it is, for its rejections.
        case unacknowledgements(RejectionPayload)
        /// A record the snapshot carries as it is (it touches no sample).
        case verbatim
        /// Nothing: the record says what was durable, not what the log means.
        case nothing

        static func of(_ record: RecordView) -> Contribution {
            switch record {
            case .sampleUpsert(let sample):
                return .version(sample.uuid, flags: FormatConstants.snapshotEntryHasVersion
                                    | (sample.isSynced ? FormatConstants.snapshotEntrySynced : 0)
                                    | sample.origin.rawValue << FormatConstants.snapshotEntryOriginShift)
            case .sampleDeleted(let tombstone):
                return .version(tombstone.uuid, flags: FormatConstants.snapshotEntryHasVersion | FormatConstants.snapshotEntryTombstone)
            case .samplesAcknowledged(let ids):
                return .acknowledgements(ids)
            case .samplesUnacknowledged(let entries):
                return .unacknowledgements(entries)
            case .intervalStatus, .intervalsCleared, .layeringRange, .dailyHighScore, .sourceAnchor, .samplesRejected, .destination:
                return .verbatim
            case .syncedThrough, .padding:
                return .nothing
            }
        }
    }

    /// The order that puts `entries` in snapshot order (the index's hash,
    /// then the UUID), as indices.
    public static func hashOrder(_ entries: [SampleEntry]) -> [UInt32] {
        // The uuids read in place: a copy of them would be a large part of
        // compaction's memory (it sorts a whole output segment's entries).
        bucketOrder(hashes: entries.map(\.uuid.mixedHash), uuids: entries.lazy.map(\.uuid))
    }

    /// A stable sort by (hash, uuid), as indices: equal keys keep their input
    /// order. The hashes are uniform, so a counting sort by their top bits
    /// (about four items a bucket) and an insertion sort within each bucket
    /// do it in linear time, where a comparison sort would dominate a
    /// snapshot build.
    static func bucketOrder<UUIDs: RandomAccessCollection>(hashes: [UInt64], uuids: UUIDs) -> [UInt32]
    where UUIDs.Element == UUIDBytes, UUIDs.Index == Int {
        let n = hashes.count
        precondition(uuids.count == n, "one uuid per hash")
        guard n > 1 else { return (0..<n).map { UInt32($0) } }
        let bits = min(24, max(1, Int.bitWidth - n.leadingZeroBitCount - 2))
        let shift = UInt64(64 - bits)
        var starts = [Int](repeating: 0, count: (1 << bits) + 1)
        for h in hashes { starts[Int(truncatingIfNeeded: h >> shift) + 1] += 1 }
        for b in 0..<(1 << bits) { starts[b + 1] += starts[b] }
        var order = [UInt32](repeating: 0, count: n)
        hashes.withUnsafeBufferPointer { hashes in
            order.withUnsafeMutableBufferPointer { order in
                var next = starts
                for i in 0..<n {
                    let b = Int(truncatingIfNeeded: hashes[i] >> shift)
                    order[next[b]] = UInt32(truncatingIfNeeded: i)
                    next[b] += 1
                }
                @inline(__always) func less(_ x: UInt32, _ y: UInt32) -> Bool {
                    let (a, b) = (Int(x), Int(y))
                    if hashes[a] != hashes[b] { return hashes[a] < hashes[b] }
                    return (uuids[a].high, uuids[a].low) < (uuids[b].high, uuids[b].low)
                }
                for b in 0..<(1 << bits) where starts[b + 1] - starts[b] > 1 {
                    for i in (starts[b] + 1)..<starts[b + 1] {
                        let item = order[i]
                        var j = i
                        while j > starts[b] && less(item, order[j - 1]) {
                            order[j] = order[j - 1]
                            j -= 1
                        }
                        order[j] = item
                    }
                }
            }
        }
        return order
    }
}
