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
        let version = segment.header.version
        var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart)
        while let item = try reader.next() {
            switch item {
            case .damage(let offset, let damage):
                throw StepLogError.corruption(path: segment.path, offset: offset, reason: damage.description)
            case .record(let offset, let type, let payload, _):
                guard RecordType.isDefined(type, inVersion: version) else {
                    throw StepLogError.corruption(path: segment.path, offset: offset, reason: undefinedTypeReason(type, version: version))
                }
                if type == RecordType.sampleUpsert.rawValue {
                    guard SamplePayload.isWellFormed(payload) else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: SamplePayload.problem(payload).description)
                    }
                    var flags = FormatConstants.snapshotEntryHasVersion
                    if SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0 { flags |= FormatConstants.snapshotEntrySynced }
                    event(SamplePayload.uuid(payload), UInt32(offset), flags)
                } else if type == RecordType.sampleDeleted.rawValue {
                    guard TombstonePayload.isWellFormed(payload) else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: TombstonePayload.problem(payload).description)
                    }
                    event(TombstonePayload.uuid(payload), UInt32(offset),
                          FormatConstants.snapshotEntryHasVersion | FormatConstants.snapshotEntryTombstone)
                } else if type == RecordType.samplesAcknowledged.rawValue {
                    guard let n = AcknowledgedPayload.count(payload) else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: AcknowledgedPayload.problem(payload).description)
                    }
                    for i in 0..<n { event(AcknowledgedPayload.uuid(payload, i), 0, FormatConstants.snapshotEntrySynced) }
                } else {
                    if case .failure(let problem) = LogRecord.decode(type: type, payload: payload) {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: problem.description)
                    }
                    // Synced-through and padding records say what was durable, not
                    // what the log means: a snapshot does not carry them.
                    if type != RecordType.syncedThrough.rawValue && type != RecordType.padding.rawValue {
                        others.append(OtherRecord(offset: UInt32(offset), type: type, payload: Array(payload)))
                    }
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

    /// The reason a record of `type` cannot be in a segment of `version`.
    static func undefinedTypeReason(_ type: UInt8, version: UInt16) -> String {
        RecordType(rawValue: type) == nil ? "unknown record type \(type)"
            : "record type \(type) is not defined in format version \(version)"
    }

    /// The order that puts `entries` in snapshot order (the index's hash,
    /// then the UUID), as indices.
    public static func hashOrder(_ entries: [SampleEntry]) -> [UInt32] {
        // The uuids read in place: compaction sorts 800,000 entries an output
        // segment, and a copy of their uuids was 13 MB of its memory peak.
        bucketOrder(hashes: entries.map(\.uuid.mixedHash), uuids: entries.lazy.map(\.uuid))
    }

    /// A stable sort by (hash, uuid), as indices: equal keys keep their input
    /// order. The hashes are uniform, so a counting sort by their top bits
    /// (about four items a bucket) and an insertion sort within each bucket
    /// do it in linear time: a comparison sort was a seventh of a
    /// compaction's CPU and most of a snapshot build's.
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
