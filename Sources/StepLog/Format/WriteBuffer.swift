/// A growable byte buffer with little-endian append helpers (NIO's `ByteBuffer`
/// idea, reduced to what the encoder needs). Owns its memory; not thread-safe.
public final class WriteBuffer {
    private(set) var storage: UnsafeMutableRawPointer
    private(set) var capacity: Int
    /// Number of bytes written.
    public internal(set) var count: Int = 0

    public init(capacity: Int = 64 << 10) {
        self.capacity = max(capacity, 64)
        storage = UnsafeMutableRawPointer.allocate(byteCount: self.capacity, alignment: 16)
    }

    deinit { storage.deallocate() }

    /// The bytes written so far (valid until the next mutation).
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: count) }

    /// Forgets the contents, keeps the memory.
    public func removeAll() { count = 0 }

    /// Drops everything after the first `newCount` bytes.
    public func truncate(to newCount: Int) {
        precondition(newCount >= 0 && newCount <= count)
        count = newCount
    }

    /// Makes room for `additional` more bytes.
    @inline(__always)
    public func reserve(_ additional: Int) {
        if count + additional > capacity { grow(to: count + additional) }
    }

    private func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        newStorage.copyMemory(from: storage, byteCount: count)
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
    }

    @inline(__always) public func append(_ value: UInt8) {
        reserve(1); storage.storeBytes(of: value, toByteOffset: count, as: UInt8.self); count += 1
    }

    @inline(__always) public func append(_ value: UInt16) {
        reserve(2); storage.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt16.self); count += 2
    }

    @inline(__always) public func append(_ value: UInt32) {
        reserve(4); storage.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt32.self); count += 4
    }

    @inline(__always) public func append(_ value: UInt64) {
        reserve(8); storage.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt64.self); count += 8
    }

    @inline(__always) public func append(_ value: Int64) { append(UInt64(bitPattern: value)) }

    public func append(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (storage + count).copyMemory(from: base, byteCount: bytes.count)
        count += bytes.count
    }

    public func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

    /// Appends the 16 bytes of `uuid` in RFC 4122 order.
    @inline(__always) public func append(_ uuid: UUIDBytes) {
        reserve(16)
        storage.storeBytes(of: uuid.high.bigEndian, toByteOffset: count, as: UInt64.self)
        storage.storeBytes(of: uuid.low.bigEndian, toByteOffset: count + 8, as: UInt64.self)
        count += 16
    }

    /// Appends the UTF-8 bytes of `string` (no length prefix).
    public func appendUTF8(_ string: String) {
        var string = string
        string.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Overwrites 4 bytes at `offset` (already written) with `value`, little-endian.
    @inline(__always) public func set(_ value: UInt32, at offset: Int) {
        precondition(offset + 4 <= count)
        storage.storeBytes(of: value.littleEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// Overwrites 1 byte at `offset` (already written).
    @inline(__always) public func set(_ value: UInt8, at offset: Int) {
        precondition(offset < count)
        storage.storeBytes(of: value, toByteOffset: offset, as: UInt8.self)
    }
}
