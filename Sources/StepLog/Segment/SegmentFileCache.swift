#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Read-only descriptors of sealed segments for point reads, at most `limit`
/// open at once (a store of thousands of small segments must not exhaust the
/// process's descriptors), and read-only mappings of them for the index's
/// confirming reads (a mapping holds no descriptor).
final class SegmentFileCache {
    private var open: [UInt64: FileDescriptor] = [:]
    private var order: [UInt64] = []
    private var mappings: [UInt64: UnsafeRawBufferPointer] = [:]
    private let limit: Int

    init(limit: Int = 32) { self.limit = limit }

    deinit { closeAll() }

    func descriptor(for segment: SegmentInfo) throws -> FileDescriptor {
        if let fd = open[segment.sequence] { return fd }
        if open.count >= limit, let victim = order.first {
            order.removeFirst()
            open.removeValue(forKey: victim)?.close()
        }
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        open[segment.sequence] = fd
        order.append(segment.sequence)
        return fd
    }

    /// A read-only mapping of a segment file covering at least its first
    /// `end` bytes, made on first use and kept until `forget`: how the index's
    /// confirming reads become memory loads. The writer's file grows (and may
    /// be preallocated past its data): a mapping too short for `end` is
    /// replaced by one of the file's current size. Only bytes already written
    /// to the file may be read through it.
    func mapping(for segment: SegmentInfo, covering end: Int) throws -> UnsafeRawBufferPointer {
        if let m = mappings[segment.sequence], m.count >= end { return m }
        let fd = try FileDescriptor.open(segment.path, O_RDONLY)
        defer { fd.close() }
        let size = Int(try fd.size())
        guard size >= end, let base = mmap(nil, size, PROT_READ, MAP_SHARED, fd.rawValue, 0), base != MAP_FAILED else {
            throw StepLogError.io(operation: "mmap", path: segment.path, errno: size >= end ? errno : EINVAL)
        }
        if let old = mappings[segment.sequence] { munmap(UnsafeMutableRawPointer(mutating: old.baseAddress), old.count) }
        let m = UnsafeRawBufferPointer(start: base, count: size)
        mappings[segment.sequence] = m
        return m
    }

    func forget(_ sequence: UInt64) {
        open.removeValue(forKey: sequence)?.close()
        order.removeAll { $0 == sequence }
        if let m = mappings.removeValue(forKey: sequence) { munmap(UnsafeMutableRawPointer(mutating: m.baseAddress), m.count) }
    }

    func closeAll() {
        for fd in open.values { fd.close() }
        open.removeAll()
        order.removeAll()
        for m in mappings.values { munmap(UnsafeMutableRawPointer(mutating: m.baseAddress), m.count) }
        mappings.removeAll()
    }
}
