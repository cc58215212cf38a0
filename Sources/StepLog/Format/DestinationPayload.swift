/// The `destination` payload,
/// `recordedAt:i64 provenEqualAt:i64 uploader[16] serverLen:u8 server userLen:u8 user urlLen:u16 url`
/// (strings UTF-8; the URL at most `maxDestinationURLBytes`): the codec that
/// writes one, and a view of a checked one.
public struct DestinationPayload {
    public let bytes: UnsafeRawBufferPointer

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<DestinationPayload, PayloadProblem> {
        var r = ByteReader(bytes)
        guard r.readInt64() != nil, r.readInt64() != nil, r.readUUID() != nil,
              let server = r.readUInt8(), r.readString(Int(server)) != nil,
              let user = r.readUInt8(), r.readString(Int(user)) != nil,
              let url = r.readUInt16(), Int(url) <= FormatConstants.maxDestinationURLBytes, r.readString(Int(url)) != nil,
              r.isAtEnd else {
            return .failure(.malformed(.destination, size: bytes.count))
        }
        return .success(DestinationPayload(bytes: bytes))
    }

    /// The destination, decoded.
    public var destination: StoreDestination {
        var r = ByteReader(bytes)
        let recorded = r.readInt64()!, proven = r.readInt64()!, uploader = r.readUUID()!
        let server = r.readString(Int(r.readUInt8()!))!
        let user = r.readString(Int(r.readUInt8()!))!
        let url = r.readString(Int(r.readUInt16()!))!
        return StoreDestination(serverId: server, user: user, url: url, uploader: uploader.uuid,
                                recordedAtMilliseconds: recorded, provenEqualAtMilliseconds: proven)
    }

    /// Appends a framed record of `destination` (checked by its `validationProblem` first).
    public static func append(_ destination: StoreDestination, to buffer: WriteBuffer) {
        RecordFrame.append(type: .destination, to: buffer) { b in
            b.append(destination.recordedAtMilliseconds)
            b.append(destination.provenEqualAtMilliseconds)
            b.append(UUIDBytes(destination.uploader))
            for name in [destination.serverId, destination.user] {
                let utf8 = Array(name.utf8)
                b.append(UInt8(utf8.count))
                b.append(utf8)
            }
            let url = Array(destination.url.utf8)
            b.append(UInt16(url.count))
            b.append(url)
        }
    }
}
