/// Framing of one record: `length u32 | type u8 | masked crc32c(type ‖ payload) u32 | payload`.
///
/// The one place that writes a frame header or reads one (LevelDB keeps its
/// log's framing in `EmitPhysicalRecord` alone): every record, whatever its
/// type, is framed by `append` and checked by `decode`.
public enum RecordFrame {
    /// Bytes of the header before every payload.
    public static let headerSize = FormatConstants.recordHeaderSize

    /// What was found at an offset of a segment.
    public enum Decoded {
        /// A whole record whose checksum matched.
        case record(type: UInt8, payload: UnsafeRawBufferPointer, size: Int)
        /// Fewer than a header's bytes remain.
        case truncatedHeader(available: Int)
        /// The length field points past the end of the data.
        case truncatedPayload(declared: Int, available: Int)
        /// The length field exceeds `maxRecordPayload`.
        case impossibleLength(UInt32)
        /// The stored checksum does not match (the length is then not trusted).
        case checksumMismatch(stored: UInt32, computed: UInt32)
    }

    /// Bytes a record whose payload has `count` bytes takes on disk.
    @inline(__always)
    public static func size(payload count: Int) -> Int { headerSize + count }

    /// Appends a record whose payload has `payloadSize` bytes, which `store`
    /// writes at the address it is given: the hot path of every write (one
    /// reservation, the fields stored in place, no copy). Returns the offset
    /// in `buffer` where the frame starts.
    @discardableResult
    @inline(__always)
    public static func append(_ type: RecordType, payloadSize: Int, to buffer: WriteBuffer,
                              storing store: (UnsafeMutableRawPointer) -> Void) -> Int {
        precondition(payloadSize <= FormatConstants.maxRecordPayload, "record payload of \(payloadSize) bytes exceeds the format's limit")
        let start = buffer.count
        buffer.reserve(headerSize + payloadSize)
        let frame = buffer.storage + start
        store(frame + headerSize)
        seal(frame, type: type.rawValue, payloadSize: payloadSize)
        buffer.count = start + headerSize + payloadSize
        return start
    }

    /// Appends a record whose payload `writePayload` appends to the buffer
    /// (for payloads whose size is known only once written). Returns the
    /// offset in `buffer` where the frame starts.
    @discardableResult
    public static func append(type: RecordType, to buffer: WriteBuffer, payload writePayload: (WriteBuffer) -> Void) -> Int {
        let start = buffer.count
        buffer.reserve(headerSize)
        buffer.count = start + headerSize
        writePayload(buffer)
        let length = buffer.count - start - headerSize
        precondition(length <= FormatConstants.maxRecordPayload, "record payload of \(length) bytes exceeds the format's limit")
        seal(buffer.storage + start, type: type.rawValue, payloadSize: length)
        return start
    }

    /// Writes the header of the frame at `frame`, whose payload follows it.
    @inline(__always)
    private static func seal(_ frame: UnsafeMutableRawPointer, type: UInt8, payloadSize: Int) {
        frame.storeBytes(of: UInt32(payloadSize).littleEndian, as: UInt32.self)
        frame.storeBytes(of: type, toByteOffset: 4, as: UInt8.self)
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(start: frame + 4, count: 1))
        crc = CRC32C.extend(crc, UnsafeRawBufferPointer(start: frame + headerSize, count: payloadSize))
        frame.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: 5, as: UInt32.self)
    }

    /// Decodes the frame starting at `offset` in `bytes` and checks its checksum.
    @inline(__always)
    public static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Decoded {
        let available = bytes.count - offset
        guard available >= headerSize else { return .truncatedHeader(available: max(available, 0)) }
        let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        guard length <= FormatConstants.maxRecordPayload else { return .impossibleLength(length) }
        let size = headerSize + Int(length)
        guard size <= available else { return .truncatedPayload(declared: Int(length), available: available - headerSize) }
        let type = bytes[offset + 4]
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 5, as: UInt32.self))
        let payloadStart = offset + headerSize
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<(payloadStart + Int(length))])
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 5)]))
        crc = CRC32C.extend(crc, payload)
        guard CRC32C.unmask(stored) == crc else { return .checksumMismatch(stored: stored, computed: CRC32C.mask(crc)) }
        return .record(type: type, payload: payload, size: size)
    }

    /// The type and payload length a frame starting at `offset` declares,
    /// unchecked, or nil when fewer than a header's bytes remain. After
    /// damage no length is trusted, so the tail rule tries every offset; this
    /// lets it skip those that cannot be the record it looks for before
    /// computing a checksum.
    @inline(__always)
    static func declared(in bytes: UnsafeRawBufferPointer, at offset: Int) -> (type: UInt8, payloadLength: Int)? {
        guard offset >= 0, offset + headerSize <= bytes.count else { return nil }
        return (bytes[offset + 4], Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))))
    }

    /// Offset of the last non-zero byte of `bytes`, or nil when all are zero:
    /// a segment's data ends where only zeros follow (no record starts with
    /// a zero byte run: its type is never 0).
    static func lastNonZeroByte(in bytes: UnsafeRawBufferPointer) -> Int? {
        // Eight bytes at a time, then the byte within.
        var i = bytes.count
        while i >= 8 {
            if bytes.loadUnaligned(fromByteOffset: i - 8, as: UInt64.self) != 0 { break }
            i -= 8
        }
        while i > 0 {
            if bytes[i - 1] != 0 { return i - 1 }
            i -= 1
        }
        return nil
    }

    /// Bytes from a frame's start that `keyOfVersion` reads.
    static let versionKeyBytes = headerSize + 16

    /// The UUID of the sample version or tombstone whose frame starts at
    /// `offset`, read without checking the checksum (the record was checked
    /// when it was replayed, or when the snapshot naming it was built): how
    /// the index confirms a tag match. Nil when the frame there is of another
    /// type, or `bytes` ends before its UUID.
    @inline(__always)
    static func keyOfVersion(in bytes: UnsafeRawBufferPointer, at offset: Int) -> (key: UUIDBytes, isTombstone: Bool)? {
        guard let (type, _) = declared(in: bytes, at: offset), offset + versionKeyBytes <= bytes.count else { return nil }
        // Both payloads start with the UUID.
        switch RecordType(rawValue: type) {
        case .sampleUpsert: return (UUIDBytes(loadingFrom: bytes, at: offset + headerSize), false)
        case .sampleDeleted: return (UUIDBytes(loadingFrom: bytes, at: offset + headerSize), true)
        default: return nil
        }
    }

    /// The type code of the frame starting at `offset`, unchecked (for an
    /// error that names what was found), or nil past the end.
    static func declaredType(in bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt8? {
        declared(in: bytes, at: offset)?.type
    }
}
