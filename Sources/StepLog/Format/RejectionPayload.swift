/// The `samplesRejected` payload:
/// `n:u32 (uuid[16] rejectedAt:i64 reasonLen:u16 reason[reasonLen])×n`.
public enum RejectionPayload {
    /// Appends a framed record of `rejections` (reasons already cut to
    /// `maxRejectionReasonBytes`).
    public static func appendRecord(_ rejections: [SampleRejection], to buffer: WriteBuffer) {
        RecordFrame.append(type: .samplesRejected, to: buffer) { appendPayload(rejections, to: $0) }
    }

    /// Appends the payload alone (compaction rewrites a record keeping only
    /// the entries that still apply).
    public static func appendPayload(_ rejections: [SampleRejection], to b: WriteBuffer) {
        b.append(UInt32(rejections.count))
        for r in rejections {
            b.append(UUIDBytes(r.id))
            b.append(r.rejectedAtMilliseconds)
            let reason = Array(clipped(r.reason).utf8)
            b.append(UInt16(reason.count))
            b.append(reason)
        }
    }

    public static func decode(_ payload: UnsafeRawBufferPointer) -> Result<[SampleRejection], PayloadProblem> {
        var r = ByteReader(payload)
        guard let n = r.readUInt32() else { return .failure(problem(payload)) }
        var result: [SampleRejection] = []
        result.reserveCapacity(min(Int(n), payload.count / 26))
        for _ in 0..<n {
            guard let id = r.readUUID(), let at = r.readInt64(), let length = r.readUInt16(),
                  Int(length) <= FormatConstants.maxRejectionReasonBytes, let reason = r.readString(Int(length)) else {
                return .failure(problem(payload))
            }
            result.append(SampleRejection(id: id.uuid, rejectedAtMilliseconds: at, reason: reason))
        }
        guard r.isAtEnd else { return .failure(problem(payload)) }
        return .success(result)
    }

    static func problem(_ payload: UnsafeRawBufferPointer) -> PayloadProblem {
        PayloadProblem("samples-rejected payload of \(payload.count) bytes is malformed")
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
