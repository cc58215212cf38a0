/// The `intervalStatus` payload,
/// `uuid[16] | start i64 | end i64 | stepCount i64 | status u8` (41 bytes).
public struct IntervalStatusPayload {
    public let bytes: UnsafeRawBufferPointer
    static let size = 41

    public static func checked(_ bytes: UnsafeRawBufferPointer) -> Result<IntervalStatusPayload, PayloadProblem> {
        guard bytes.count == size else { return .failure(.wrongSize(.intervalStatus, expected: size, found: bytes.count)) }
        guard IntervalStatus(rawValue: bytes[40]) != nil else { return .failure(.unknownIntervalStatus(bytes[40])) }
        return .success(IntervalStatusPayload(bytes: bytes))
    }

    /// The interval's id, read alone (liveness asks only for it).
    public var id: UUIDBytes { UUIDBytes(loadingFrom: bytes, at: 0) }

    public var interval: SyncInterval {
        var r = ByteReader(bytes, offset: 16)
        return SyncInterval(id: id.uuid, startMilliseconds: r.readInt64()!, endMilliseconds: r.readInt64()!,
                            stepCount: r.readInt64()!, status: IntervalStatus(rawValue: r.readUInt8()!)!)
    }

    public static func append(_ i: SyncInterval, to buffer: WriteBuffer) {
        RecordFrame.append(type: .intervalStatus, to: buffer) { b in
            b.append(UUIDBytes(i.id))
            b.append(i.startMilliseconds)
            b.append(i.endMilliseconds)
            b.append(i.stepCount)
            b.append(i.status.rawValue)
        }
    }
}
