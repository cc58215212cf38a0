#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A scratch buffer of whole pages from its own anonymous mapping, unmapped
/// on deinit.
///
/// For multi-megabyte buffers that live briefly: glibc's malloc serves them
/// with mmap too, but freeing one raises its mmap threshold to that size, after
/// which every allocation below it comes from arenas that keep their memory.
final class PageBuffer {
    let base: UnsafeMutableRawPointer
    let count: Int

    init(count: Int) {
        self.count = count
        guard let memory = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              memory != MAP_FAILED else { fatalError("cannot map a \(count)-byte buffer") }
        base = memory
    }

    deinit { munmap(base, count) }
}
