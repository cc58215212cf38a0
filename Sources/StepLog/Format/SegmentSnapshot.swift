/// An index snapshot ("hint file", after Bitcask) of one sealed segment: what
/// replaying the segment does to the index, so opening can skip the replay.
///
/// For each sample the segment touches, its final effect (a new version or
/// tombstone at an offset, synced or not; only "the current version is now
/// acknowledged"; or "the UUID is gone", its tombstone acknowledged),
/// sorted by the index's hash so that loading writes the index almost
/// sequentially; plus the segment's other records verbatim, in order. Bound
/// to its segment by sequence, base position, size and a checksum of the
/// segment's last 4 KiB: anything that does not match is stale and ignored.
public struct SegmentSnapshot: Equatable, Sendable {
    public struct SampleEntry: Equatable, Sendable {
        public var uuid: UUIDBytes
        public var offset: UInt32
        public var flags: UInt8

        public init(uuid: UUIDBytes, offset: UInt32, flags: UInt8) {
            self.uuid = uuid
            self.offset = offset
            self.flags = flags
        }

        /// Entry `i` of a snapshot's raw entries (`snapshotEntrySize` bytes each).
        @inline(__always)
        init(loadingFrom raw: UnsafeRawBufferPointer, index i: Int) {
            let at = i &* FormatConstants.snapshotEntrySize
            self.init(uuid: UUIDBytes(loadingFrom: raw, at: at),
                      offset: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: at &+ 16, as: UInt32.self)),
                      flags: raw[at &+ 20])
        }

        /// The UUID of entry `i` of raw entries, read alone (a binary search by hash).
        @inline(__always)
        static func uuid(in raw: UnsafeRawBufferPointer, index i: Int) -> UUIDBytes {
            UUIDBytes(loadingFrom: raw, at: i &* FormatConstants.snapshotEntrySize)
        }

        /// The segment holds a version of this sample (or its tombstone), at `offset`.
        @inline(__always) public var hasVersion: Bool { flags & FormatConstants.snapshotEntryHasVersion != 0 }
        /// After the segment that version (or, without one, the version before the segment) is acknowledged.
        @inline(__always) public var isSynced: Bool { flags & FormatConstants.snapshotEntrySynced != 0 }
        /// The version at `offset` is a tombstone.
        @inline(__always) public var isTombstone: Bool { flags & FormatConstants.snapshotEntryTombstone != 0 }
        /// The UUID is absent after the segment (its tombstone was acknowledged).
        @inline(__always) public var isRemoved: Bool { flags & FormatConstants.snapshotEntryRemoved != 0 }
        /// Without a version in the segment: the version before it lost its acknowledgement.
        @inline(__always) public var isUnsynced: Bool { flags & FormatConstants.snapshotEntryUnsynced != 0 }
        /// The origin of the sample version at `offset`.
        @inline(__always) public var origin: SampleOrigin {
            SampleOrigin(rawValue: (flags & FormatConstants.snapshotEntryOriginMask) >> FormatConstants.snapshotEntryOriginShift)!
        }

        /// Folds the next event of this UUID, in log order, into the entry: a
        /// version or tombstone (`flags` with hasVersion, and a version's
        /// origin) replaces it; an acknowledgement (`flags` synced only) marks
        /// a version synced, turns a tombstone into "removed", leaves "removed"
        /// as it is, and without a version in this segment acknowledges the one
        /// before it; a lost acknowledgement (`flags` unsynced only) unsyncs a
        /// sample version, leaves a tombstone and "removed" as they are, and
        /// without a version in this segment unsyncs the one before it. A
        /// version keeps its origin through both.
        mutating func fold(offset eventOffset: UInt32, flags eventFlags: UInt8) {
            let hasVersion = flags & FormatConstants.snapshotEntryHasVersion != 0
            if eventFlags & FormatConstants.snapshotEntryUnsynced != 0 {
                if hasVersion {
                    if flags & FormatConstants.snapshotEntryTombstone == 0 { flags &= ~FormatConstants.snapshotEntrySynced }
                } else if flags & FormatConstants.snapshotEntryRemoved == 0 {
                    flags = FormatConstants.snapshotEntryUnsynced
                }
            } else if eventFlags & FormatConstants.snapshotEntryHasVersion != 0 {
                offset = eventOffset
                flags = eventFlags
            } else if hasVersion {
                if flags & FormatConstants.snapshotEntryTombstone != 0 {
                    offset = 0
                    flags = FormatConstants.snapshotEntryRemoved
                } else {
                    flags |= FormatConstants.snapshotEntrySynced
                }
            } else if flags & FormatConstants.snapshotEntryRemoved == 0 {
                flags = FormatConstants.snapshotEntrySynced
            }
        }
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
    /// UUIDs in the index after this segment (all segments up to it): lets
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

    init(header: Header, samples: [SampleEntry], others: [OtherRecord]) {
        self.init(sequence: header.sequence, basePosition: header.basePosition, segmentSize: header.segmentSize,
                  tailChecksum: header.tailChecksum, keysAfter: header.keysAfter, samples: samples, others: others)
    }

    /// Where sample entry `i` starts in a snapshot file (an error names it).
    static func fileOffset(ofEntry i: Int) -> Int64 {
        Int64(FormatConstants.snapshotHeaderSize + i * FormatConstants.snapshotEntrySize)
    }

    /// The 21-byte sample entries of a body, decoded.
    static func sampleEntries(_ raw: UnsafeRawBufferPointer, count: Int) -> [SampleEntry] {
        (0..<count).map { SampleEntry(loadingFrom: raw, index: $0) }
    }

    /// Checks a whole snapshot file's body (everything after the header)
    /// against its header: the entries fit and the body's checksum matches.
    static func checkBody(_ body: UnsafeRawBufferPointer, of header: Header) -> Problem? {
        guard header.sampleCount * FormatConstants.snapshotEntrySize <= body.count else {
            return Problem("snapshot ends inside its sample entries")
        }
        guard CRC32C.unmask(header.bodyChecksum) == CRC32C.checksum(body) else {
            return Problem("snapshot body checksum mismatch (damaged or truncated)")
        }
        return nil
    }

    /// The version in a snapshot header when the header is whole (its magic
    /// and checksum good), whatever the version; nil otherwise.
    static func headerVersion(_ bytes: UnsafeRawBufferPointer) -> UInt16? {
        guard bytes.count >= FormatConstants.snapshotHeaderSize,
              bytes.prefix(8).elementsEqual(FormatConstants.snapshotMagic) else { return nil }
        let checked = FormatConstants.snapshotHeaderSize - 4
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: checked, as: UInt32.self))
        guard CRC32C.unmask(stored) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<checked])) else { return nil }
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
    }

    /// The checksum that ties a snapshot to its segment, of the segment's
    /// last bytes (`snapshotTailBytes`, or all of them after the header).
    static func tailChecksum(of tail: UnsafeRawBufferPointer) -> UInt32 { CRC32C.mask(CRC32C.checksum(tail)) }

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
}
