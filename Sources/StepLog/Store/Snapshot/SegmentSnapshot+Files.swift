#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentSnapshot {
    /// Masked CRC-32C of the segment's last 4 KiB (or all of it after the header).
    public static func tailChecksum(_ fd: FileDescriptor, dataStart: Int64, size: Int64) throws -> UInt32 {
        let from = max(dataStart, size - Int64(FormatConstants.snapshotTailBytes))
        let count = Int(max(0, size - from))
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: count, at: from) }
        return bytes.withUnsafeBytes { tailChecksum(of: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
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

    /// Reads the snapshot file of `segment` through once, through a read-only
    /// mapping (no copy, and no buffer to fault in), and checks it, without
    /// decoding its entries.
    public static func check(for segment: SegmentInfo, directory: String) -> Result<Checked, Problem> {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return .failure(Problem("cannot read the snapshot")) }
        var owned: FileDescriptor? = fd
        defer { owned?.close() }
        guard let size = try? Int(fd.size()) else { return .failure(Problem("cannot read the snapshot")) }
        let headerSize = FormatConstants.snapshotHeaderSize
        guard size >= headerSize else {
            var bytes = [UInt8](repeating: 0, count: size)
            guard (try? bytes.withUnsafeMutableBytes { size == 0 ? 0 : try fd.read(into: $0.baseAddress!, count: size, at: 0) }) == size else {
                return .failure(Problem("cannot read the snapshot"))
            }
            return bytes.withUnsafeBytes { decodeHeader($0) }.flatMap { _ in .failure(Problem("cannot read the snapshot")) }
        }
        // Snapshot files are replaced by rename, never cut in place, so the
        // mapping cannot lose pages under it (a SIGBUS).
        guard let base = mmap(nil, size, PROT_READ, MAP_SHARED, fd.rawValue, 0), base != MAP_FAILED else {
            return .failure(Problem("cannot read the snapshot"))
        }
        defer { munmap(base, size) }
        #if canImport(Glibc)
        _ = madvise(base, size, MADV_SEQUENTIAL)
        #endif
        let file = UnsafeRawBufferPointer(start: base, count: size)
        let header: Header
        switch decodeHeader(UnsafeRawBufferPointer(rebasing: file[0..<headerSize])) {
        case .failure(let p): return .failure(p)
        case .success(let h): header = h
        }
        if let problem = checkBody(UnsafeRawBufferPointer(rebasing: file[headerSize...]), of: header) { return .failure(problem) }
        let entryBytes = header.sampleCount * FormatConstants.snapshotEntrySize
        let others = Array(file[(headerSize + entryBytes)...])
        let otherRecords: [OtherRecord]
        switch others.withUnsafeBytes({ parseOthers($0, after: 0, count: header.otherCount) }) {
        case .failure(let p): return .failure(p)
        case .success(let o): otherRecords = o
        }
        guard let segmentFD = try? FileDescriptor.open(segment.path, O_RDONLY) else { return .failure(Problem("cannot open the segment")) }
        defer { segmentFD.close() }
        guard let tail = try? tailChecksum(segmentFD, dataStart: segment.dataStart, size: segment.size) else { return .failure(Problem("cannot read the segment")) }
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
        guard let bytes = headerBytes(sequence: sequence, directory: directory),
              case .success(let header) = bytes.withUnsafeBytes({ decodeHeader($0) }) else { return nil }
        return header
    }

    /// The version in a snapshot file's header when the header is whole (its
    /// magic and checksum good), whatever the version; nil otherwise.
    public static func fileVersion(sequence: UInt64, directory: String) -> UInt16? {
        headerBytes(sequence: sequence, directory: directory)?.withUnsafeBytes { headerVersion($0) }
    }

    /// The first `snapshotHeaderSize` bytes of the snapshot file of segment
    /// `sequence`, or nil when it has fewer or cannot be read.
    private static func headerBytes(sequence: UInt64, directory: String) -> [UInt8]? {
        let path = Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))
        guard let fd = try? FileDescriptor.open(path, O_RDONLY) else { return nil }
        defer { fd.close() }
        var bytes = [UInt8](repeating: 0, count: FormatConstants.snapshotHeaderSize)
        guard let n = try? bytes.withUnsafeMutableBytes({ try fd.read(into: $0.baseAddress!, count: $0.count, at: 0) }),
              n == bytes.count else { return nil }
        return bytes
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
