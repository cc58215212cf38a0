#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Read-only descriptors of sealed segments for point reads, at most `limit`
/// open at once (a store of thousands of small segments must not exhaust the
/// process's descriptors).
final class SegmentFileCache {
    private var open: [UInt64: FileDescriptor] = [:]
    private var order: [UInt64] = []
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

    func forget(_ sequence: UInt64) {
        open.removeValue(forKey: sequence)?.close()
        order.removeAll { $0 == sequence }
    }

    func closeAll() {
        for fd in open.values { fd.close() }
        open.removeAll()
        order.removeAll()
    }
}
