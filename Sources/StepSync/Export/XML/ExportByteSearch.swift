#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Byte searches over borrowed memory for the XML scanner: `memchr` (the C
/// library's vectorized search) for single bytes, a first-byte `memchr` plus
/// a compare for short terminators. Offsets are relative to `base`; `to` is
/// exclusive. Nothing here reads outside [from, to).
enum ExportByteSearch {
    @inline(__always)
    static func find(_ byte: UInt8, in base: UnsafePointer<UInt8>, from: Int, to: Int) -> Int? {
        guard from < to, let hit = memchr(base + from, Int32(byte), to - from) else { return nil }
        return UnsafeRawPointer(base).distance(to: UnsafeRawPointer(hit))
    }

    /// Offset of the first occurrence of `needle` (2 to 16 bytes) in [from, to).
    static func find(_ needle: StaticString, in base: UnsafePointer<UInt8>, from: Int, to: Int) -> Int? {
        let count = needle.utf8CodeUnitCount
        let bytes = needle.utf8Start
        var start = from
        while let hit = find(bytes[0], in: base, from: start, to: to - count + 1) {
            if memcmp(base + hit, bytes, count) == 0 { return hit }
            start = hit + 1
        }
        return nil
    }

    /// Whether the `count` bytes at `offset` equal `literal` (the caller checked that they exist).
    @inline(__always)
    static func equals(_ base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int, _ literal: StaticString) -> Bool {
        count == literal.utf8CodeUnitCount && memcmp(base + offset, literal.utf8Start, count) == 0
    }

    /// Whether `literal` starts at `offset`, given that the buffer ends at `end`.
    @inline(__always)
    static func hasPrefix(_ base: UnsafePointer<UInt8>, _ offset: Int, _ end: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        return end - offset >= count && memcmp(base + offset, literal.utf8Start, count) == 0
    }

    /// XML whitespace, plus the other C0 control bytes: real exports carry
    /// stray U+000B, and treating any byte below 0x21 as a separator between
    /// attributes is the tolerant reading (inside values bytes are kept as is).
    @inline(__always)
    static func isSpace(_ byte: UInt8) -> Bool { byte <= 0x20 }
}
