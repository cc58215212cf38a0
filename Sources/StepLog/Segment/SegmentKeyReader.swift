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
    private var mappings: [Int: (base: UnsafeMutableRawPointer, size: Int)] = [:]

    /// `segments` in log order (ascending base positions), as they are on disk.
    init(segments: [SegmentInfo]) { self.segments = segments }

    deinit {
        for m in mappings.values { munmap(m.base, m.size) }
    }

    private func mapping(_ i: Int) throws -> (base: UnsafeMutableRawPointer, size: Int) {
        if let m = mappings[i] { return m }
        let segment = segments[i]
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        let size = Int(try fd.size())
        guard size > 0, let base = mmap(nil, size, PROT_READ, MAP_SHARED, fd.rawValue, 0), base != MAP_FAILED else {
            throw StepLogError.io(operation: "mmap", path: segment.path, errno: errno)
        }
        mappings[i] = (base, size)
        return (base, size)
    }

    func key(at position: LogPosition) throws -> UUIDBytes {
        var lo = 0, hi = segments.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if segments[mid].basePosition <= position.rawValue { lo = mid } else { hi = mid - 1 }
        }
        guard !segments.isEmpty, segments[lo].basePosition <= position.rawValue else {
            throw StepLogError.corruption(path: "", offset: Int64(position.rawValue), reason: "no segment holds log position \(position.rawValue)")
        }
        let m = try mapping(lo)
        return try Self.key(in: UnsafeRawBufferPointer(start: m.base, count: m.size),
                            at: Int(position.rawValue - segments[lo].basePosition), path: segments[lo].path)
    }

    /// The UUID of the sample or tombstone record at `offset` of a segment's
    /// mapping (`path` names it in the error when no such record is there).
    static func key(in mapping: UnsafeRawBufferPointer, at offset: Int, path: String) throws -> UUIDBytes {
        let end = offset + FormatConstants.recordHeaderSize + 16
        let type = end <= mapping.count ? mapping.load(fromByteOffset: offset + 4, as: UInt8.self) : 0
        guard type == RecordType.sampleUpsert.rawValue || type == RecordType.sampleDeleted.rawValue else {
            throw StepLogError.corruption(path: path, offset: Int64(offset),
                                          reason: "the index points at \(end > mapping.count ? "the end of the segment" : "a record of type \(type)"), not a sample or tombstone")
        }
        return UUIDBytes(loadingFrom: mapping, at: offset + FormatConstants.recordHeaderSize)
    }
}
