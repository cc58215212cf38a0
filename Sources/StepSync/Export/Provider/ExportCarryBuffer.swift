#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes the scanner has not finished with at the end of a chunk (an
/// element cut in two), kept until the next chunk arrives. Usually a few
/// hundred bytes; grows only while one element is larger than a chunk, and
/// shrinks back after it.
struct ExportCarryBuffer: ~Copyable {
    static let initialCapacity = ExportChunk.prefixCapacity

    private(set) var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int

    init() {
        capacity = Self.initialCapacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// Replaces the contents with `count` bytes at `source` (which must not be inside this buffer).
    mutating func replace(with source: UnsafePointer<UInt8>, count newCount: Int) {
        if newCount > capacity || (capacity > Self.initialCapacity && newCount <= Self.initialCapacity) {
            resize(to: max(newCount, Self.initialCapacity), keeping: 0)
        }
        base.update(from: source, count: newCount)
        count = newCount
    }

    mutating func append(_ source: UnsafePointer<UInt8>, count extra: Int) {
        if count + extra > capacity { resize(to: max(count + extra, capacity * 2), keeping: count) }
        (base + count).update(from: source, count: extra)
        count += extra
    }

    /// Drops the first `n` bytes, moving the rest to the front.
    mutating func removeFirst(_ n: Int) {
        let rest = count - n
        if rest > 0 { memmove(base, base + n, rest) }   // overlapping ranges
        count = rest
        if capacity > Self.initialCapacity, count <= Self.initialCapacity {
            resize(to: Self.initialCapacity, keeping: count)
        }
    }

    private mutating func resize(to newCapacity: Int, keeping kept: Int) {
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        grown.update(from: base, count: kept)
        base.deallocate()
        base = grown
        capacity = newCapacity
    }
}
