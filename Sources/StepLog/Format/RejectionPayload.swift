/// The `samplesRejected` payload,
/// `n:u32 (uuid[16] rejectedAt:i64 reasonLen:u16 reason[reasonLen])×n`: the
/// codec that writes one, and a view of a checked one. A
/// `samplesUnacknowledged` record has the same payload (`type`).
public struct RejectionPayload {
    public let bytes: UnsafeRawBufferPointer

    @inline(__always)
    public static func checked(_ bytes: UnsafeRawBufferPointer, as type: RecordType = .samplesRejected) -> Result<RejectionPayload, PayloadProblem> {
        var r = ByteReader(bytes)
        guard let n = r.readUInt32() else { return .failure(.malformed(type, size: bytes.count)) }
        for _ in 0..<n {
            guard r.readUUID() != nil, r.readInt64() != nil, let length = r.readUInt16(),
                  Int(length) <= FormatConstants.maxRejectionReasonBytes, r.readBytes(Int(length)) != nil else {
                return .failure(.malformed(type, size: bytes.count))
            }
        }
        guard r.isAtEnd else { return .failure(.malformed(type, size: bytes.count)) }
        return .success(RejectionPayload(bytes: bytes))
    }

    /// The rejections, decoded (reasons as strings).
    public var rejections: [SampleRejection] {
        var r = ByteReader(bytes)
        let n = Int(r.readUInt32()!)
        var result: [SampleRejection] = []
        result.reserveCapacity(n)
        for _ in 0..<n {
            let id = r.readUUID()!, at = r.readInt64()!, length = r.readUInt16()!
            result.append(SampleRejection(id: id.uuid, rejectedAtMilliseconds: at, reason: r.readString(Int(length))!))
        }
        return result
    }

    /// Appends a framed record of `rejections` (reasons already cut to
    /// `maxRejectionReasonBytes`).
    public static func append(_ rejections: [SampleRejection], as type: RecordType = .samplesRejected, to buffer: WriteBuffer) {
        RecordFrame.append(type: type, to: buffer) { b in
            b.append(UInt32(rejections.count))
            for r in rejections {
                b.append(UUIDBytes(r.id))
                b.append(r.rejectedAtMilliseconds)
                let reason = Array(clipped(r.reason).utf8)
                b.append(UInt16(reason.count))
                b.append(reason)
            }
        }
    }

    /// The payload bytes `rejections` take (what compaction keeps of a record).
    public static func payloadSize(_ rejections: [SampleRejection]) -> Int {
        rejections.reduce(4) { $0 + 16 + 8 + 2 + clipped($1.reason).utf8.count }
    }

    /// `reason` cut to at most `maxRejectionReasonBytes` of UTF-8, at a character boundary.
    public static func clipped(_ reason: String) -> String {
        guard reason.utf8.count > FormatConstants.maxRejectionReasonBytes else { return reason }
        var result = ""
        var bytes = 0
        for c in reason {
            let n = String(c).utf8.count
            if bytes + n > FormatConstants.maxRejectionReasonBytes { break }
            result.append(c)
            bytes += n
        }
        return result
    }
}
