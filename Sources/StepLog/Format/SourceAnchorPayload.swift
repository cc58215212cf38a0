/// The `sourceAnchor` payload, `family u64 | length u32 | anchor[length]`
/// (at most `maxAnchorBytes` of anchor).
public struct SourceAnchorPayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<SourceAnchorPayload, PayloadProblem> {
        var r = ByteReader(bytes)
        guard r.readUInt64() != nil, let length = r.readUInt32(), length <= FormatConstants.maxAnchorBytes,
              r.readBytes(Int(length)) != nil, r.isAtEnd else {
            return .failure(.malformed(.sourceAnchor, size: bytes.count))
        }
        return .success(SourceAnchorPayload(bytes: bytes))
    }

    /// The source family's fingerprint (FNV-1a 64 of its name).
    public var family: UInt64 { UInt64(littleEndian: bytes.loadUnaligned(as: UInt64.self)) }

    /// The anchor's bytes (a view).
    public var anchor: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[12...]) }

    public static func append(family: UInt64, anchor: [UInt8], to buffer: WriteBuffer) {
        RecordFrame.append(type: .sourceAnchor, to: buffer) { b in
            b.append(family)
            b.append(UInt32(anchor.count))
            b.append(anchor)
        }
    }
}
