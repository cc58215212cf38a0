#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An index snapshot ("hint file", after Bitcask) of one sealed segment: what
/// replaying the segment does to the index, so opening can skip the replay.
///
/// For each sample the segment touches, its final effect (a new version at an
/// offset, synced or not; or only "the current version is now synced"),
/// sorted by the index's hash so that loading writes the index almost
/// sequentially; plus the segment's other records verbatim, in order. Bound
/// to its segment by sequence, base position, size and a checksum of the
/// segment's last 4 KiB: anything that does not match is stale and ignored.
public struct SegmentSnapshot: Equatable, Sendable {
    public struct SampleEntry: Equatable, Sendable {
        public var uuid: UUIDBytes
        public var offset: UInt32
        public var flags: UInt8
    }

    public struct OtherRecord: Equatable, Sendable {
        public var offset: UInt32
        public var type: UInt8
        public var payload: [UInt8]
    }

    public var sequence: UInt64
    public var basePosition: UInt64
    public var segmentSize: UInt64
    public var tailChecksum: UInt32
    /// Samples in the index after this segment (all segments up to it): lets
    /// opening size the index exactly instead of from overlapping counts.
    public var keysAfter: UInt64
    public var samples: [SampleEntry]
    public var others: [OtherRecord]

    public init(sequence: UInt64, basePosition: UInt64, segmentSize: UInt64, tailChecksum: UInt32, keysAfter: UInt64,
                samples: [SampleEntry], others: [OtherRecord]) {
        self.sequence = sequence
        self.basePosition = basePosition
        self.segmentSize = segmentSize
        self.tailChecksum = tailChecksum
        self.keysAfter = keysAfter
        self.samples = samples
        self.others = others
    }

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
        var reader = SegmentReader(fd: fd, fileSize: segment.size)
        while let item = try reader.next() {
            switch item {
            case .damage(let offset, let damage):
                throw StepLogError.corruption(path: segment.path, offset: offset, reason: damage.description)
            case .record(let offset, let type, let payload, _):
                if type == RecordType.sampleUpsert.rawValue {
                    guard SamplePayload.isWellFormed(payload) else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: "malformed sample-upsert payload")
                    }
                    var flags = FormatConstants.snapshotEntryHasVersion
                    if SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0 { flags |= FormatConstants.snapshotEntrySynced }
                    event(SamplePayload.uuid(payload), UInt32(offset), flags)
                } else if type == RecordType.samplesSynced.rawValue {
                    let n = payload.count >= 4 ? Int(UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: 0, as: UInt32.self))) : -1
                    guard payload.count == 4 + 16 * n else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: "malformed samples-synced payload")
                    }
                    for i in 0..<n { event(UUIDBytes(loadingFrom: payload, at: 4 + 16 * i), 0, FormatConstants.snapshotEntrySynced) }
                } else {
                    if case .failure(let problem) = LogRecord.decode(type: type, payload: payload) {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: problem.description)
                    }
                    others.append(OtherRecord(offset: UInt32(offset), type: type, payload: Array(payload)))
                }
            }
        }
        let order = bucketOrder(hashes: hashes, uuids: uuids)
        var samples: [SampleEntry] = []
        samples.reserveCapacity(order.count)
        var i = 0
        while i < order.count {
            // The events of one sample, in log order: a version resets the
            // synced flag to its own; a marker sets it.
            var entry = SampleEntry(uuid: uuids[Int(order[i])], offset: 0, flags: 0)
            var j = i
            while j < order.count && uuids[Int(order[j])] == entry.uuid {
                let e = Int(order[j])
                if eventFlags[e] & FormatConstants.snapshotEntryHasVersion != 0 {
                    entry.offset = offsets[e]
                    entry.flags = eventFlags[e]
                } else {
                    entry.flags |= FormatConstants.snapshotEntrySynced
                }
                j += 1
            }
            samples.append(entry)
            i = j
        }
        return SegmentSnapshot(sequence: segment.sequence, basePosition: segment.basePosition, segmentSize: UInt64(segment.size),
                               tailChecksum: try tailChecksum(fd, size: segment.size), keysAfter: UInt64(keysAfter),
                               samples: samples, others: others)
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

    /// Masked CRC-32C of the segment's last 4 KiB (or all of it after the header).
    public static func tailChecksum(_ fd: FileDescriptor, size: Int64) throws -> UInt32 {
        let from = max(Int64(FormatConstants.segmentHeaderSize), size - Int64(FormatConstants.snapshotTailBytes))
        let count = Int(size - from)
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: count, at: from) }
        return CRC32C.mask(bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<n])) })
    }

    // MARK: Encoding

    /// The whole file's bytes (tests and tools; `write` streams instead).
    public func encoded() -> [UInt8] {
        var body: [UInt8] = []
        let crc = Self.streamBody(count: samples.count, entry: { samples[$0] }, others: others) { body += $0 }
        let header = headerBytes(bodyChecksum: crc, sampleCount: samples.count, otherCount: others.count)
        return withExtendedLifetime(header) { Array(header.bytes) } + body
    }

    /// The 72 header bytes.
    func headerBytes(bodyChecksum: UInt32, sampleCount: Int, otherCount: Int) -> WriteBuffer {
        let header = WriteBuffer(capacity: FormatConstants.snapshotHeaderSize)
        header.append(FormatConstants.snapshotMagic)
        header.append(FormatConstants.snapshotVersion)
        header.append(UInt16(0))
        header.append(sequence)
        header.append(basePosition)
        header.append(segmentSize)
        header.append(tailChecksum)
        header.append(keysAfter)
        header.append(UInt64(sampleCount))
        header.append(UInt64(otherCount))
        header.append(CRC32C.mask(bodyChecksum))
        header.append(CRC32C.mask(CRC32C.checksum(header.bytes)))
        return header
    }

    /// Emits the body (sample entries, then other records) in pieces of about
    /// 1 MiB, and returns its CRC-32C: a snapshot is never built whole in memory.
    static func streamBody(count: Int, entry: (Int) -> SampleEntry, others: [OtherRecord],
                           emit: (UnsafeRawBufferPointer) throws -> Void) rethrows -> UInt32 {
        let piece = WriteBuffer(capacity: (1 << 20) + 64)
        var crc: UInt32 = 0
        func flush() throws {
            crc = CRC32C.extend(crc, piece.bytes)
            try emit(piece.bytes)
            piece.removeAll()
        }
        for i in 0..<count {
            let e = entry(i)
            piece.append(e.uuid)
            piece.append(e.offset)
            piece.append(e.flags)
            if piece.count >= 1 << 20 { try flush() }
        }
        for o in others {
            piece.append(o.offset)
            piece.append(o.type)
            piece.append(UInt32(o.payload.count))
            piece.append(o.payload)
            if piece.count >= 1 << 20 { try flush() }
        }
        if piece.count > 0 { try flush() }
        return crc
    }

    /// Why a snapshot file cannot be used.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }

    /// The header fields, checked by their own checksum.
    public struct Header: Equatable, Sendable {
        public var sequence: UInt64
        public var basePosition: UInt64
        public var segmentSize: UInt64
        public var tailChecksum: UInt32
        public var keysAfter: UInt64
        public var sampleCount: Int
        public var otherCount: Int
        public var bodyChecksum: UInt32
    }

    public static func decodeHeader(_ bytes: UnsafeRawBufferPointer) -> Result<Header, Problem> {
        guard bytes.count >= FormatConstants.snapshotHeaderSize else {
            return .failure(Problem("snapshot is truncated (\(bytes.count) bytes, header needs \(FormatConstants.snapshotHeaderSize))"))
        }
        for (i, m) in FormatConstants.snapshotMagic.enumerated() where bytes[i] != m { return .failure(Problem("not a snapshot (bad magic)")) }
        var r = ByteReader(bytes, offset: 8)
        let version = r.readUInt16()!
        _ = r.readUInt16()
        let sequence = r.readUInt64()!, base = r.readUInt64()!, size = r.readUInt64()!
        let tail = r.readUInt32()!
        let keysAfter = r.readUInt64()!
        let samples = r.readUInt64()!, others = r.readUInt64()!
        let bodyChecksum = r.readUInt32()!, headerChecksum = r.readUInt32()!
        let checked = FormatConstants.snapshotHeaderSize - 4
        guard CRC32C.unmask(headerChecksum) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<checked])) else {
            return .failure(Problem("snapshot header checksum mismatch"))
        }
        guard version == FormatConstants.snapshotVersion else { return .failure(Problem("snapshot version \(version) is not supported")) }
        guard samples <= UInt64(Int32.max), others <= UInt64(Int32.max) else { return .failure(Problem("snapshot counts are impossible")) }
        return .success(Header(sequence: sequence, basePosition: base, segmentSize: size, tailChecksum: tail, keysAfter: keysAfter,
                               sampleCount: Int(samples), otherCount: Int(others), bodyChecksum: bodyChecksum))
    }

    /// Decodes a whole snapshot file and checks both checksums.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentSnapshot, Problem> {
        let header: Header
        switch decodeHeader(bytes) {
        case .failure(let p): return .failure(p)
        case .success(let h): header = h
        }
        let body = UnsafeRawBufferPointer(rebasing: bytes[FormatConstants.snapshotHeaderSize...])
        guard CRC32C.unmask(header.bodyChecksum) == CRC32C.checksum(body) else {
            return .failure(Problem("snapshot body checksum mismatch (damaged or truncated)"))
        }
        let entryBytes = header.sampleCount * FormatConstants.snapshotEntrySize
        guard entryBytes <= body.count else { return .failure(Problem("snapshot ends inside its sample entries")) }
        return parseOthers(body, after: entryBytes, count: header.otherCount).map { others in
            SegmentSnapshot(header: header, samples: sampleEntries(UnsafeRawBufferPointer(rebasing: body[0..<entryBytes]), count: header.sampleCount),
                            others: others)
        }
    }

    private init(header: Header, samples: [SampleEntry], others: [OtherRecord]) {
        self.init(sequence: header.sequence, basePosition: header.basePosition, segmentSize: header.segmentSize,
                  tailChecksum: header.tailChecksum, keysAfter: header.keysAfter, samples: samples, others: others)
    }

    /// The 21-byte sample entries of a body, decoded.
    static func sampleEntries(_ raw: UnsafeRawBufferPointer, count: Int) -> [SampleEntry] {
        (0..<count).map { i in
            let at = i * FormatConstants.snapshotEntrySize
            return SampleEntry(uuid: UUIDBytes(loadingFrom: raw, at: at),
                               offset: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at + 16, as: UInt32.self)),
                               flags: raw[at + 20])
        }
    }

    /// The other records, which follow the sample entries and end the body.
    static func parseOthers(_ body: UnsafeRawBufferPointer, after entryBytes: Int, count: Int) -> Result<[OtherRecord], Problem> {
        var r = ByteReader(body, offset: entryBytes)
        var others: [OtherRecord] = []
        for _ in 0..<count {
            guard let offset = r.readUInt32(), let type = r.readUInt8(), let length = r.readUInt32(),
                  let payload = r.readBytes(Int(length)) else {
                return .failure(Problem("snapshot ends inside its records"))
            }
            others.append(OtherRecord(offset: offset, type: type, payload: Array(payload)))
        }
        guard r.isAtEnd else { return .failure(Problem("snapshot has \(r.remaining) bytes after its records")) }
        return .success(others)
    }

    /// Checks that this snapshot describes `segment` as it is on disk now.
    public func matches(_ segment: SegmentInfo, tailChecksum actual: UInt32) -> Problem? {
        if sequence != segment.sequence { return Problem("snapshot is for segment \(sequence), not \(segment.sequence)") }
        if basePosition != segment.basePosition || segmentSize != UInt64(segment.size) {
            return Problem("snapshot is stale: it describes \(segmentSize) bytes at position \(basePosition), the segment has \(segment.size) at \(segment.basePosition)")
        }
        if tailChecksum != actual { return Problem("snapshot is stale: the segment's last bytes changed") }
        return nil
    }

    // MARK: Files

    /// Writes the snapshot next to its segment: temporary file, sync, rename,
    /// directory sync.
    public func write(directory: String) throws {
        try write(directory: directory, count: samples.count, entry: { samples[$0] })
    }

    /// Writes this snapshot's header fields with `count` sample entries given
    /// by `entry` (already in hash order) instead of `samples`: the body is
    /// streamed, then the header (which carries the body's checksum).
    public func write(directory: String, count: Int, entry: (Int) -> SampleEntry) throws {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))
        let temporary = path + FormatConstants.temporarySuffix
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            var at = Int64(FormatConstants.snapshotHeaderSize)
            let crc = try Self.streamBody(count: count, entry: entry, others: others) { piece in
                try fd.write(piece, at: at)
                at += Int64(piece.count)
            }
            // `bytes` views the buffer's memory: keep the buffer alive while it is written.
            let header = headerBytes(bodyChecksum: crc, sampleCount: count, otherCount: others.count)
            try withExtendedLifetime(header) { try fd.write(header.bytes, at: 0) }
            try fd.sync()
        } catch {
            fd.close()
            try? Directory.remove(temporary)
            throw error
        }
        fd.close()
        try Directory.rename(temporary, to: path)
        try Directory.sync(directory)
    }

    /// A snapshot file checked (both checksums, and against its segment),
    /// whose sample entries are then read a window at a time.
    public struct Checked: Sendable {
        public let header: Header
        /// The sample entries: `header.sampleCount` × 21 bytes, in hash order.
        public let entries: SnapshotEntryReader
        /// The segment's other records, in order.
        public let others: [OtherRecord]
    }

    /// Reads the snapshot file of `segment` through once, 4 MiB at a time, and
    /// checks it, without decoding its entries.
    public static func check(for segment: SegmentInfo, directory: String) -> Result<Checked, Problem> {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return .failure(Problem("cannot read the snapshot")) }
        var owned: FileDescriptor? = fd
        defer { owned?.close() }
        guard let size = try? Int(fd.size()) else { return .failure(Problem("cannot read the snapshot")) }
        fd.adviseSequential()
        let headerSize = FormatConstants.snapshotHeaderSize
        let piece = 4 << 20
        let buffer = PageBuffer(count: max(headerSize, min(piece, size)))
        func read(_ count: Int, at offset: Int) -> UnsafeRawBufferPointer? {
            guard let n = try? fd.read(into: buffer.base, count: count, at: Int64(offset)), n == count else { return nil }
            return UnsafeRawBufferPointer(start: buffer.base, count: count)
        }
        guard let headerBytes = read(min(headerSize, size), at: 0) else { return .failure(Problem("cannot read the snapshot")) }
        let header: Header
        switch decodeHeader(headerBytes) {
        case .failure(let p): return .failure(p)
        case .success(let h): header = h
        }
        let bodySize = size - headerSize
        let entryBytes = header.sampleCount * FormatConstants.snapshotEntrySize
        guard entryBytes <= bodySize else { return .failure(Problem("snapshot ends inside its sample entries")) }
        var crc: UInt32 = 0
        var others: [UInt8] = []
        others.reserveCapacity(bodySize - entryBytes)
        var at = 0
        while at < bodySize {
            let count = min(piece, bodySize - at)
            guard let bytes = read(count, at: headerSize + at) else { return .failure(Problem("cannot read the snapshot")) }
            crc = CRC32C.extend(crc, bytes)
            if at + count > entryBytes { others.append(contentsOf: bytes[max(0, entryBytes - at)...]) }
            at += count
        }
        guard CRC32C.unmask(header.bodyChecksum) == crc else {
            return .failure(Problem("snapshot body checksum mismatch (damaged or truncated)"))
        }
        let otherRecords: [OtherRecord]
        switch others.withUnsafeBytes({ parseOthers($0, after: 0, count: header.otherCount) }) {
        case .failure(let p): return .failure(p)
        case .success(let o): otherRecords = o
        }
        guard let segmentFD = try? FileDescriptor.open(segment.path, O_RDONLY) else { return .failure(Problem("cannot open the segment")) }
        defer { segmentFD.close() }
        guard let tail = try? tailChecksum(segmentFD, size: segment.size) else { return .failure(Problem("cannot read the segment")) }
        if let problem = SegmentSnapshot(header: header, samples: [], others: []).matches(segment, tailChecksum: tail) {
            return .failure(problem)
        }
        owned = nil // the entry reader closes it
        let entries = SnapshotEntryReader(fd: fd, firstEntryOffset: Int64(headerSize), count: header.sampleCount)
        return .success(Checked(header: header, entries: entries, others: otherRecords))
    }

    /// What a snapshot file's header says (nil when there is no readable
    /// header). Opening sizes the index from its `keysAfter`.
    public static func header(sequence: UInt64, directory: String) -> Header? {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return nil }
        defer { fd.close() }
        var bytes = [UInt8](repeating: 0, count: FormatConstants.snapshotHeaderSize)
        guard let n = try? bytes.withUnsafeMutableBytes({ try fd.read(into: $0.baseAddress!, count: $0.count, at: 0) }),
              n == bytes.count, case .success(let header) = bytes.withUnsafeBytes({ decodeHeader($0) }) else { return nil }
        return header
    }

    /// Reads and checks the snapshot file of `segment` against it (as
    /// `check` does), with its entries decoded.
    public static func load(for segment: SegmentInfo, directory: String) -> Result<SegmentSnapshot, Problem> {
        check(for: segment, directory: directory).flatMap { checked in
            let reader = checked.entries
            var samples: [SampleEntry] = []
            samples.reserveCapacity(reader.count)
            var start = 0
            while start < reader.count {
                guard (try? reader.load(from: start)) != nil else { return .failure(Problem("cannot read the snapshot")) }
                samples += sampleEntries(reader.window, count: reader.windowEnd - reader.windowStart)
                start = reader.windowEnd
            }
            return .success(SegmentSnapshot(header: checked.header, samples: samples, others: checked.others))
        }
    }
}
