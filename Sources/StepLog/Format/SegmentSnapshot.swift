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
public struct SegmentSnapshot: Equatable {
    public struct SampleEntry: Equatable {
        public var uuid: UUIDBytes
        public var offset: UInt32
        public var flags: UInt8
    }

    public struct OtherRecord: Equatable {
        public var offset: UInt32
        public var type: UInt8
        public var payload: [UInt8]
    }

    public var sequence: UInt64
    public var basePosition: UInt64
    public var segmentSize: UInt64
    public var tailChecksum: UInt32
    public var samples: [SampleEntry]
    public var others: [OtherRecord]

    // MARK: Building from a segment

    /// Reads a sealed segment and computes its snapshot. Throws on any damage
    /// (a snapshot is only ever made of a clean segment).
    public static func build(from segment: SegmentInfo) throws -> SegmentSnapshot {
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        fd.adviseSequential()
        var effects: [UUIDBytes: (offset: UInt32, flags: UInt8)] = [:]
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
                    effects[SamplePayload.uuid(payload)] = (UInt32(offset), flags)
                } else if type == RecordType.samplesSynced.rawValue {
                    guard case .success(.samplesSynced(let ids)) = LogRecord.decode(type: type, payload: payload) else {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: "malformed samples-synced payload")
                    }
                    for id in ids {
                        let key = UUIDBytes(id)
                        if let e = effects[key] {
                            effects[key] = (e.offset, e.flags | FormatConstants.snapshotEntrySynced)
                        } else {
                            effects[key] = (0, FormatConstants.snapshotEntrySynced)
                        }
                    }
                } else {
                    if case .failure(let problem) = LogRecord.decode(type: type, payload: payload) {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: problem.description)
                    }
                    others.append(OtherRecord(offset: UInt32(offset), type: type, payload: Array(payload)))
                }
            }
        }
        var samples = effects.map { SampleEntry(uuid: $0.key, offset: $0.value.offset, flags: $0.value.flags) }
        samples.sort { ($0.uuid.mixedHash, $0.uuid.high, $0.uuid.low) < ($1.uuid.mixedHash, $1.uuid.high, $1.uuid.low) }
        return SegmentSnapshot(sequence: segment.sequence, basePosition: segment.basePosition, segmentSize: UInt64(segment.size),
                               tailChecksum: try tailChecksum(fd, size: segment.size), samples: samples, others: others)
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

    public func encoded() -> [UInt8] {
        let body = WriteBuffer(capacity: samples.count * FormatConstants.snapshotEntrySize + 1024)
        for e in samples {
            body.append(e.uuid)
            body.append(e.offset)
            body.append(e.flags)
        }
        for o in others {
            body.append(o.offset)
            body.append(o.type)
            body.append(UInt32(o.payload.count))
            body.append(o.payload)
        }
        let header = WriteBuffer(capacity: FormatConstants.snapshotHeaderSize)
        header.append(FormatConstants.snapshotMagic)
        header.append(FormatConstants.snapshotVersion)
        header.append(UInt16(0))
        header.append(sequence)
        header.append(basePosition)
        header.append(segmentSize)
        header.append(tailChecksum)
        header.append(UInt64(samples.count))
        header.append(UInt64(others.count))
        header.append(CRC32C.mask(CRC32C.checksum(body.bytes)))
        header.append(CRC32C.mask(CRC32C.checksum(header.bytes)))
        return Array(header.bytes) + Array(body.bytes)
    }

    /// Why a snapshot file cannot be used.
    public struct Problem: Error, Equatable, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }

    /// The header fields, checked by their own checksum.
    public struct Header: Equatable {
        public var sequence: UInt64
        public var basePosition: UInt64
        public var segmentSize: UInt64
        public var tailChecksum: UInt32
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
        let samples = r.readUInt64()!, others = r.readUInt64()!
        let bodyChecksum = r.readUInt32()!, headerChecksum = r.readUInt32()!
        guard CRC32C.unmask(headerChecksum) == CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<60])) else {
            return .failure(Problem("snapshot header checksum mismatch"))
        }
        guard version == FormatConstants.snapshotVersion else { return .failure(Problem("snapshot version \(version) is not supported")) }
        guard samples <= UInt64(Int32.max), others <= UInt64(Int32.max) else { return .failure(Problem("snapshot counts are impossible")) }
        return .success(Header(sequence: sequence, basePosition: base, segmentSize: size, tailChecksum: tail,
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
        var r = ByteReader(body)
        var samples: [SampleEntry] = []
        samples.reserveCapacity(header.sampleCount)
        for _ in 0..<header.sampleCount {
            guard let uuid = r.readUUID(), let offset = r.readUInt32(), let flags = r.readUInt8() else {
                return .failure(Problem("snapshot ends inside its sample entries"))
            }
            samples.append(SampleEntry(uuid: uuid, offset: offset, flags: flags))
        }
        var others: [OtherRecord] = []
        for _ in 0..<header.otherCount {
            guard let offset = r.readUInt32(), let type = r.readUInt8(), let length = r.readUInt32(),
                  let payload = r.readBytes(Int(length)) else {
                return .failure(Problem("snapshot ends inside its records"))
            }
            others.append(OtherRecord(offset: offset, type: type, payload: Array(payload)))
        }
        guard r.isAtEnd else { return .failure(Problem("snapshot has \(r.remaining) bytes after its records")) }
        return .success(SegmentSnapshot(sequence: header.sequence, basePosition: header.basePosition, segmentSize: header.segmentSize,
                                        tailChecksum: header.tailChecksum, samples: samples, others: others))
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
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))
        let temporary = path + FormatConstants.temporarySuffix
        let bytes = encoded()
        let fd = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try bytes.withUnsafeBytes { try fd.write($0, at: 0) }
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

    /// A snapshot file mapped into memory and checked (both checksums, and
    /// against its segment), whose sample entries are read in place.
    public struct Mapped: @unchecked Sendable {
        public let file: MappedFile
        public let header: Header
        /// The sample entries: `header.sampleCount` × 21 bytes.
        public let entries: UnsafeRawBufferPointer
        /// The segment's other records, in order.
        public let others: [OtherRecord]
    }

    /// Maps the snapshot file of `segment` and checks it, without decoding its entries.
    public static func map(for segment: SegmentInfo, directory: String) -> Result<Mapped, Problem> {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence))
        guard let file = try? MappedFile(path: path) else { return .failure(Problem("cannot read the snapshot")) }
        let bytes = file.bytes
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
        var r = ByteReader(body, offset: entryBytes)
        var others: [OtherRecord] = []
        for _ in 0..<header.otherCount {
            guard let offset = r.readUInt32(), let type = r.readUInt8(), let length = r.readUInt32(),
                  let payload = r.readBytes(Int(length)) else {
                return .failure(Problem("snapshot ends inside its records"))
            }
            others.append(OtherRecord(offset: offset, type: type, payload: Array(payload)))
        }
        guard r.isAtEnd else { return .failure(Problem("snapshot has \(r.remaining) bytes after its records")) }
        guard let segmentFD = try? FileDescriptor.open(segment.path, O_RDONLY) else { return .failure(Problem("cannot open the segment")) }
        defer { segmentFD.close() }
        guard let tail = try? tailChecksum(segmentFD, size: segment.size) else { return .failure(Problem("cannot read the segment")) }
        let probe = SegmentSnapshot(sequence: header.sequence, basePosition: header.basePosition, segmentSize: header.segmentSize,
                                    tailChecksum: header.tailChecksum, samples: [], others: [])
        if let problem = probe.matches(segment, tailChecksum: tail) { return .failure(problem) }
        return .success(Mapped(file: file, header: header, entries: UnsafeRawBufferPointer(rebasing: body[0..<entryBytes]), others: others))
    }

    /// The number of sample entries a snapshot file says it holds (its header
    /// only; nil when there is no readable header). Opening sizes the index with it.
    public static func sampleCount(sequence: UInt64, directory: String) -> Int? {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return nil }
        defer { fd.close() }
        var bytes = [UInt8](repeating: 0, count: FormatConstants.snapshotHeaderSize)
        guard let n = try? bytes.withUnsafeMutableBytes({ try fd.read(into: $0.baseAddress!, count: $0.count, at: 0) }),
              n == bytes.count, case .success(let header) = bytes.withUnsafeBytes({ decodeHeader($0) }) else { return nil }
        return header.sampleCount
    }

    /// Reads and checks the snapshot file of `segment` against it.
    public static func load(for segment: SegmentInfo, directory: String) -> Result<SegmentSnapshot, Problem> {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return .failure(Problem("no snapshot")) }
        defer { fd.close() }
        guard let size = try? fd.size() else { return .failure(Problem("cannot stat the snapshot")) }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        guard let n = try? bytes.withUnsafeMutableBytes({ try fd.read(into: $0.baseAddress!, count: $0.count, at: 0) }), n == Int(size) else {
            return .failure(Problem("cannot read the snapshot"))
        }
        let decoded = bytes.withUnsafeBytes { decode($0) }
        guard case .success(let snapshot) = decoded else { return decoded }
        guard let segmentFD = try? FileDescriptor.open(segment.path, O_RDONLY) else { return .failure(Problem("cannot open the segment")) }
        defer { segmentFD.close() }
        guard let tail = try? tailChecksum(segmentFD, size: segment.size) else { return .failure(Problem("cannot read the segment")) }
        if let problem = snapshot.matches(segment, tailChecksum: tail) { return .failure(problem) }
        return .success(snapshot)
    }
}
