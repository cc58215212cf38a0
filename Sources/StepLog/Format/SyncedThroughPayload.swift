/// The `syncedThrough` payload, `offset u64` (8 bytes): the offset of its
/// segment up to which the writer's last sync made the segment durable.
public struct SyncedThroughPayload {
    public let bytes: UnsafeRawBufferPointer

    /// Bytes a synced-through record takes on disk, frame included.
    public static let frameSize = RecordFrame.size(payload: FormatConstants.syncedThroughPayloadSize)

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<SyncedThroughPayload, PayloadProblem> {
        guard bytes.count == FormatConstants.syncedThroughPayloadSize else {
            return .failure(.wrongSize(.syncedThrough, expected: FormatConstants.syncedThroughPayloadSize, found: bytes.count))
        }
        return .success(SyncedThroughPayload(bytes: bytes))
    }

    /// The offset the record claims durable.
    public var offset: UInt64 { UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)) }

    /// True when a frame declaring `type` and `payloadLength` can be a
    /// synced-through record (the tail rule's test before a checksum).
    static func mayBe(type: UInt8, payloadLength: Int) -> Bool {
        type == RecordType.syncedThrough.rawValue && payloadLength == FormatConstants.syncedThroughPayloadSize
    }

    /// The offset a checksummed record of `type` claims, when it is a
    /// well-formed synced-through record; nil for any other record.
    static func claim(type: UInt8, payload: UnsafeRawBufferPointer) -> UInt64? {
        guard type == RecordType.syncedThrough.rawValue, case .success(let p) = checked(payload) else { return nil }
        return p.offset
    }

    public static func append(offset: UInt64, to buffer: WriteBuffer) {
        RecordFrame.append(type: .syncedThrough, to: buffer) { $0.append(offset) }
    }
}
