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
/// Reads only the record's header and the UUID that starts both payloads;
/// the record was checked when it was replayed, or when the snapshot that
/// named it was built.
final class SegmentKeyReader {
    private let segments: [SegmentInfo]
    private let files = SegmentFileCache()
    private var buffer = [UInt8](repeating: 0, count: FormatConstants.recordHeaderSize + 16)

    /// `segments` in log order (ascending base positions).
    init(segments: [SegmentInfo]) { self.segments = segments }

    func key(at position: LogPosition) throws -> UUIDBytes {
        var lo = 0, hi = segments.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if segments[mid].basePosition <= position.rawValue { lo = mid } else { hi = mid - 1 }
        }
        guard !segments.isEmpty, segments[lo].basePosition <= position.rawValue else {
            throw StepLogError.corruption(path: "", offset: Int64(position.rawValue), reason: "no segment holds log position \(position.rawValue)")
        }
        let segment = segments[lo]
        let offset = Int64(position.rawValue - segment.basePosition)
        let fd = try files.descriptor(for: segment)
        let count = buffer.count
        let n = try buffer.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: count, at: offset) }
        let type = buffer[4]
        guard n == count, type == RecordType.sampleUpsert.rawValue || type == RecordType.sampleDeleted.rawValue else {
            throw StepLogError.corruption(path: segment.path, offset: offset,
                                          reason: "the index points at \(n < count ? "the end of the segment" : "a record of type \(type)"), not a sample or tombstone")
        }
        return buffer.withUnsafeBytes { UUIDBytes(loadingFrom: $0, at: FormatConstants.recordHeaderSize) }
    }
}
