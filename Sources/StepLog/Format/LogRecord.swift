import Foundation

/// One decoded record. Payload layouts are in docs/FORMAT.md.
public enum LogRecord: Hashable, Sendable {
    case sampleUpsert(SampleRecord)
    case samplesAcknowledged([UUID])
    case intervalStatus(SyncInterval)
    case intervalsCleared(atMilliseconds: Int64)
    case layeringRange(LayeringRange)
    case dailyHighScore(DailyHighScore)
    case sampleDeleted(id: UUID, deletedAtMilliseconds: Int64)
    case syncedThrough(offset: UInt64)
    /// `length` zero bytes of payload.
    case padding(length: Int)
    case sourceAnchor(family: UInt64, anchor: [UInt8])
    case samplesRejected([SampleRejection])

    public var type: RecordType {
        switch self {
        case .sampleUpsert: .sampleUpsert
        case .samplesAcknowledged: .samplesAcknowledged
        case .intervalStatus: .intervalStatus
        case .intervalsCleared: .intervalsCleared
        case .layeringRange: .layeringRange
        case .dailyHighScore: .dailyHighScore
        case .sampleDeleted: .sampleDeleted
        case .syncedThrough: .syncedThrough
        case .padding: .padding
        case .sourceAnchor: .sourceAnchor
        case .samplesRejected: .samplesRejected
        }
    }

    /// Appends this record, framed, to `buffer`.
    public func append(to buffer: WriteBuffer) {
        switch self {
        case .sampleUpsert(let r):
            SamplePayload.appendRecord(r.sample, fetchedAt: r.fetchedAtMilliseconds, synced: r.isSynced, to: buffer)
        case .samplesAcknowledged(let ids):
            AcknowledgedPayload.appendRecord(ids.lazy.map { UUIDBytes($0) }, to: buffer)
        case .intervalStatus(let i):
            RecordFrame.append(type: .intervalStatus, to: buffer) { b in
                b.append(UUIDBytes(i.id))
                b.append(i.startMilliseconds)
                b.append(i.endMilliseconds)
                b.append(i.stepCount)
                b.append(i.status.rawValue)
            }
        case .intervalsCleared(let at):
            RecordFrame.append(type: .intervalsCleared, to: buffer) { b in b.append(at) }
        case .layeringRange(let r):
            RecordFrame.append(type: .layeringRange, to: buffer) { b in
                b.append(r.startMilliseconds)
                b.append(r.endMilliseconds)
                b.append(r.sourceFingerprint)
            }
        case .dailyHighScore(let s):
            RecordFrame.append(type: .dailyHighScore, to: buffer) { b in
                b.append(s.day)
                b.append(s.steps)
                b.append(s.recordedAtMilliseconds)
            }
        case .sampleDeleted(let id, let at):
            TombstonePayload.appendRecord(UUIDBytes(id), deletedAt: at, to: buffer)
        case .syncedThrough(let offset):
            RecordFrame.append(type: .syncedThrough, to: buffer) { b in b.append(offset) }
        case .padding(let length):
            RecordFrame.append(type: .padding, to: buffer) { b in
                b.reserve(length)
                (b.storage + b.count).initializeMemory(as: UInt8.self, repeating: 0, count: length)
                b.count += length
            }
        case .sourceAnchor(let family, let anchor):
            RecordFrame.append(type: .sourceAnchor, to: buffer) { b in
                b.append(family)
                b.append(UInt32(anchor.count))
                b.append(anchor)
            }
        case .samplesRejected(let rejections):
            RejectionPayload.appendRecord(rejections, to: buffer)
        }
    }

    /// Decodes a payload whose frame checksum already matched. Returns a reason
    /// when the type is not defined or the payload does not have its type's shape.
    public static func decode(type rawType: UInt8, payload: UnsafeRawBufferPointer) -> Result<LogRecord, PayloadProblem> {
        guard let type = RecordType(rawValue: rawType) else { return .failure(PayloadProblem("unknown record type \(rawType)")) }
        var r = ByteReader(payload)
        switch type {
        case .sampleUpsert:
            return SamplePayload.decode(payload).map { .sampleUpsert($0) }
        case .samplesAcknowledged:
            guard let n = AcknowledgedPayload.count(payload) else { return .failure(AcknowledgedPayload.problem(payload)) }
            return .success(.samplesAcknowledged((0..<n).map { AcknowledgedPayload.uuid(payload, $0).uuid }))
        case .intervalStatus:
            guard payload.count == 41, let id = r.readUUID(), let start = r.readInt64(), let end = r.readInt64(),
                  let steps = r.readInt64(), let code = r.readUInt8() else {
                return .failure(PayloadProblem("interval-status payload must be 41 bytes, found \(payload.count)"))
            }
            guard let status = IntervalStatus(rawValue: code) else {
                return .failure(PayloadProblem("interval status code \(code) is unknown"))
            }
            return .success(.intervalStatus(SyncInterval(id: id.uuid, startMilliseconds: start, endMilliseconds: end,
                                                         stepCount: steps, status: status)))
        case .intervalsCleared:
            guard payload.count == 8, let at = r.readInt64() else {
                return .failure(PayloadProblem("intervals-cleared payload must be 8 bytes, found \(payload.count)"))
            }
            return .success(.intervalsCleared(atMilliseconds: at))
        case .layeringRange:
            guard payload.count == 24, let start = r.readInt64(), let end = r.readInt64(), let source = r.readUInt64() else {
                return .failure(PayloadProblem("layering-range payload must be 24 bytes, found \(payload.count)"))
            }
            return .success(.layeringRange(LayeringRange(startMilliseconds: start, endMilliseconds: end, sourceFingerprint: source)))
        case .dailyHighScore:
            guard payload.count == 20, let day = r.readUInt32(), let steps = r.readInt64(), let at = r.readInt64() else {
                return .failure(PayloadProblem("daily-high-score payload must be 20 bytes, found \(payload.count)"))
            }
            return .success(.dailyHighScore(DailyHighScore(day: day, steps: steps, recordedAtMilliseconds: at)))
        case .sampleDeleted:
            guard TombstonePayload.isWellFormed(payload) else { return .failure(TombstonePayload.problem(payload)) }
            return .success(.sampleDeleted(id: TombstonePayload.uuid(payload).uuid,
                                           deletedAtMilliseconds: TombstonePayload.deletedAtMilliseconds(payload)))
        case .syncedThrough:
            guard payload.count == FormatConstants.syncedThroughPayloadSize, let offset = r.readUInt64() else {
                return .failure(PayloadProblem("synced-through payload must be 8 bytes, found \(payload.count)"))
            }
            return .success(.syncedThrough(offset: offset))
        case .padding:
            if let nonZero = payload.firstIndex(where: { $0 != 0 }) {
                return .failure(PayloadProblem("padding holds a non-zero byte at payload offset \(nonZero)"))
            }
            return .success(.padding(length: payload.count))
        case .sourceAnchor:
            guard let family = r.readUInt64(), let length = r.readUInt32(), length <= FormatConstants.maxAnchorBytes,
                  let anchor = r.readBytes(Int(length)), r.isAtEnd else {
                return .failure(PayloadProblem("source-anchor payload of \(payload.count) bytes is malformed"))
            }
            return .success(.sourceAnchor(family: family, anchor: Array(anchor)))
        case .samplesRejected:
            return RejectionPayload.decode(payload).map { .samplesRejected($0) }
        }
    }
}

extension LogRecord {
    /// Checks that a checksummed payload has its type's shape without building
    /// the record (cheap for samples, which replay never fully decodes).
    public static func decodeShape(type rawType: UInt8, payload: UnsafeRawBufferPointer) -> Result<Void, PayloadProblem> {
        switch RecordType(rawValue: rawType) {
        case .sampleUpsert:
            return SamplePayload.isWellFormed(payload)
                ? .success(()) : .failure(SamplePayload.problem(payload))
        case .sampleDeleted:
            return TombstonePayload.isWellFormed(payload) ? .success(()) : .failure(TombstonePayload.problem(payload))
        case .samplesAcknowledged:
            return AcknowledgedPayload.count(payload) != nil ? .success(()) : .failure(AcknowledgedPayload.problem(payload))
        default:
            break
        }
        return decode(type: rawType, payload: payload).map { _ in () }
    }
}
