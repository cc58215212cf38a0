/// A bounds-checked little-endian reader over borrowed bytes. Reading past the
/// end returns nil and never traps; loads are unaligned-safe.
public struct ByteReader {
    public let bytes: UnsafeRawBufferPointer
    /// Offset of the next byte to read.
    public private(set) var offset: Int

    public init(_ bytes: UnsafeRawBufferPointer, offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    public var remaining: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    @inline(__always) public mutating func readUInt8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    @inline(__always) public mutating func readUInt16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inline(__always) public mutating func readUInt32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { offset += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inline(__always) public mutating func readUInt64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { offset += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always) public mutating func readInt64() -> Int64? {
        readUInt64().map { Int64(bitPattern: $0) }
    }

    @inline(__always) public mutating func readUUID() -> UUIDBytes? {
        guard remaining >= 16 else { return nil }
        defer { offset += 16 }
        return UUIDBytes(loadingFrom: bytes, at: offset)
    }

    /// The next `count` bytes, or nil when fewer remain.
    public mutating func readBytes(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    /// The next `count` bytes decoded as UTF-8 (invalid sequences are replaced,
    /// which cannot happen for bytes the writer encoded from a String).
    public mutating func readString(_ count: Int) -> String? {
        readBytes(count).map { String(decoding: $0, as: UTF8.self) }
    }
}
