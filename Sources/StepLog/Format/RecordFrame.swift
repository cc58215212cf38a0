/// Framing of one record: `length u32 | type u8 | masked crc32c(type ‖ payload) u32 | payload`.
public enum RecordFrame {
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

    /// Appends a framed record to `buffer`; `writePayload` appends the payload.
    /// Returns the offset in `buffer` where the frame starts.
    @discardableResult
    @inline(__always)
    public static func append(type: RecordType, to buffer: WriteBuffer, payload writePayload: (WriteBuffer) -> Void) -> Int {
        let start = buffer.count
        buffer.append(UInt32(0))
        buffer.append(type.rawValue)
        buffer.append(UInt32(0))
        writePayload(buffer)
        let payloadStart = start + FormatConstants.recordHeaderSize
        let length = buffer.count - payloadStart
        precondition(length <= FormatConstants.maxRecordPayload, "record payload of \(length) bytes exceeds the format's limit")
        let all = buffer.bytes
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: all[(start + 4)..<(start + 5)]))
        crc = CRC32C.extend(crc, UnsafeRawBufferPointer(rebasing: all[payloadStart..<buffer.count]))
        buffer.set(UInt32(length), at: start)
        buffer.set(CRC32C.mask(crc), at: start + 5)
        return start
    }

    /// Decodes the frame starting at `offset` in `bytes` and checks its checksum.
    @inline(__always)
    public static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Decoded {
        let available = bytes.count - offset
        guard available >= FormatConstants.recordHeaderSize else { return .truncatedHeader(available: max(available, 0)) }
        let length = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        guard length <= FormatConstants.maxRecordPayload else { return .impossibleLength(length) }
        let size = FormatConstants.recordHeaderSize + Int(length)
        guard size <= available else { return .truncatedPayload(declared: Int(length), available: available - FormatConstants.recordHeaderSize) }
        let type = bytes[offset + 4]
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 5, as: UInt32.self))
        let payloadStart = offset + FormatConstants.recordHeaderSize
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<(payloadStart + Int(length))])
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 5)]))
        crc = CRC32C.extend(crc, payload)
        guard CRC32C.unmask(stored) == crc else { return .checksumMismatch(stored: stored, computed: CRC32C.mask(crc)) }
        return .record(type: type, payload: payload, size: size)
    }
}
