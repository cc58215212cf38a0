#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads the UUID of the sample or tombstone record at a log position from
/// the segment files: how the index confirms a tag match while a store is
/// being opened or verified (`SampleIndex.keyAt`), before there is a store
/// to read records through.
///
/// Each segment is mapped read-only on its first read, so a confirmation is
/// a memory load from the page cache rather than a system call (opening a
/// store confirms one per re-upserted sample in the newest segment). Reads
/// only the record's type and the UUID that starts both payloads; the record
/// was checked when it was replayed, or when the snapshot naming it was built.
final class SegmentKeyReader {
    private let segments: [SegmentInfo]
    /// Mapping of each segment, by index in `segments`, once read.
    private var mappings: [UnsafeRawBufferPointer?]
    /// The segment the last read found (reads cluster: a replayed segment's
    /// re-upserts point into few older ones).
    private var last = 0

    /// `segments` in log order (ascending base positions), as they are on disk.
    init(segments: [SegmentInfo]) {
        self.segments = segments
        mappings = Array(repeating: nil, count: segments.count)
    }

    deinit {
        for case let m? in mappings { munmap(UnsafeMutableRawPointer(mutating: m.baseAddress), m.count) }
    }

    /// Segment `i` mapped to at least `end` bytes when the file has them (a
    /// writer's segment read during a background compaction's switch-over
    /// grows: a mapping too short is replaced by one of the file's size now).
    private func mapping(_ i: Int, covering end: Int) throws -> UnsafeRawBufferPointer {
        if let m = mappings[i], m.count >= end { return m }
        let segment = segments[i]
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        let size = Int(try fd.size())
        guard size > 0, let base = mmap(nil, size, PROT_READ, MAP_SHARED, fd.rawValue, 0), base != MAP_FAILED else {
            throw StepLogError.io(operation: "mmap", path: segment.path, errno: errno)
        }
        if let old = mappings[i] { munmap(UnsafeMutableRawPointer(mutating: old.baseAddress), old.count) }
        let m = UnsafeRawBufferPointer(start: base, count: size)
        mappings[i] = m
        return m
    }

    /// The index of the segment holding `position`.
    private func segmentIndex(_ position: LogPosition) throws -> Int {
        let p = position.rawValue
        if last < segments.count, segments[last].basePosition <= p, last == segments.count - 1 || segments[last + 1].basePosition > p {
            return last
        }
        var lo = 0, hi = segments.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if segments[mid].basePosition <= p { lo = mid } else { hi = mid - 1 }
        }
        guard !segments.isEmpty, segments[lo].basePosition <= p else {
            throw StepLogError.corruption(path: "", offset: Int64(p), kind: .noSegmentHolds(position: p))
        }
        last = lo
        return lo
    }

    func key(at position: LogPosition) throws -> UUIDBytes {
        let lo = try segmentIndex(position)
        let offset = Int(position.rawValue - segments[lo].basePosition)
        let m = try mapping(lo, covering: offset + RecordFrame.versionKeyBytes)
        return try Self.key(in: m, at: offset, path: segments[lo].path)
    }

    /// The UUID of the sample or tombstone record at `offset` of a segment's
    /// mapping (`path` names it in the error when no such record is there).
    static func key(in mapping: UnsafeRawBufferPointer, at offset: Int, path: String) throws -> UUIDBytes {
        guard let (key, _) = RecordFrame.keyOfVersion(in: mapping, at: offset) else {
            let found = offset + RecordFrame.versionKeyBytes <= mapping.count ? RecordFrame.declaredType(in: mapping, at: offset) : nil
            throw StepLogError.corruption(path: path, offset: Int64(offset), kind: .indexPointsElsewhere(found: found, expected: .sampleOrTombstone))
        }
        return key
    }
}
