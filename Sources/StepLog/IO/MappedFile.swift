#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A read-only memory mapping of a whole file (mmap(2)), unmapped on deinit.
/// Used for index snapshots: applying them straight from the page cache costs
/// no copy and no freshly zeroed memory.
public final class MappedFile: @unchecked Sendable {
    public let bytes: UnsafeRawBufferPointer
    private let length: Int

    public init(path: String) throws {
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        let size = Int(try fd.size())
        length = size
        if size == 0 {
            bytes = UnsafeRawBufferPointer(start: nil, count: 0)
            return
        }
        guard let p = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd.rawValue, 0), p != MAP_FAILED else {
            throw StepLogError.io(operation: "map", path: path, errno: errno)
        }
        #if canImport(Glibc)
        _ = madvise(p, size, MADV_SEQUENTIAL)
        #endif
        bytes = UnsafeRawBufferPointer(start: p, count: size)
    }

    /// Releases the resident pages of `range` (madvise MADV_DONTNEED): they
    /// stay in the page cache and fault back in cheaply if read again. Keeps a
    /// large mapping from counting against the process's memory once used.
    public func dropResidentPages(_ range: Range<Int>) {
        guard let base = bytes.baseAddress, !range.isEmpty else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (range.lowerBound / page) * page
        let end = min(length, ((range.upperBound + page - 1) / page) * page)
        guard end > start else { return }
        _ = madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, MADV_DONTNEED)
    }

    deinit {
        if let base = bytes.baseAddress { munmap(UnsafeMutableRawPointer(mutating: base), length) }
    }
}
