import Foundation

/// One record as values (strings, arrays): what a writer encodes, and what
/// `steplog dump`, the tests and the fuzzers decode. The engine itself reads
/// records through `RecordView`, which copies nothing. Payload layouts are in
/// docs/FORMAT.md and in each payload type.
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
    case destination(StoreDestination)
    /// Each entry's sample loses its acknowledgement; one with a reason is also rejected with it.
    case samplesUnacknowledged([SampleRejection])

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
        case .destination: .destination
        case .samplesUnacknowledged: .samplesUnacknowledged
        }
    }

    /// Appends this record, framed, to `buffer`.
    public func append(to buffer: WriteBuffer) {
        switch self {
        case .sampleUpsert(let r): SamplePayload.append(r.sample, fetchedAt: r.fetchedAtMilliseconds, synced: r.isSynced, to: buffer)
        case .samplesAcknowledged(let ids): AcknowledgedPayload.append(ids.lazy.map { UUIDBytes($0) }, to: buffer)
        case .intervalStatus(let i): IntervalStatusPayload.append(i, to: buffer)
        case .intervalsCleared(let at): IntervalsClearedPayload.append(atMilliseconds: at, to: buffer)
        case .layeringRange(let r): LayeringRangePayload.append(r, to: buffer)
        case .dailyHighScore(let s): DailyHighScorePayload.append(s, to: buffer)
        case .sampleDeleted(let id, let at): TombstonePayload.append(UUIDBytes(id), deletedAt: at, to: buffer)
        case .syncedThrough(let offset): SyncedThroughPayload.append(offset: offset, to: buffer)
        case .padding(let length): PaddingPayload.append(length: length, to: buffer)
        case .sourceAnchor(let family, let anchor): SourceAnchorPayload.append(family: family, anchor: anchor, to: buffer)
        case .samplesRejected(let rejections): RejectionPayload.append(rejections, to: buffer)
        case .destination(let d): DestinationPayload.append(d, to: buffer)
        case .samplesUnacknowledged(let entries): RejectionPayload.append(entries, as: .samplesUnacknowledged, to: buffer)
        }
    }

    /// The values a view's bytes hold (a handler: see `RecordView`).
    public init(_ view: RecordView) {
        switch view {
        case .sampleUpsert(let p): self = .sampleUpsert(p.record)
        case .samplesAcknowledged(let p): self = .samplesAcknowledged((0..<p.count).map { p.uuid($0).uuid })
        case .intervalStatus(let p): self = .intervalStatus(p.interval)
        case .intervalsCleared(let p): self = .intervalsCleared(atMilliseconds: p.atMilliseconds)
        case .layeringRange(let p): self = .layeringRange(p.range)
        case .dailyHighScore(let p): self = .dailyHighScore(p.score)
        case .sampleDeleted(let p): self = .sampleDeleted(id: p.uuid.uuid, deletedAtMilliseconds: p.deletedAtMilliseconds)
        case .syncedThrough(let p): self = .syncedThrough(offset: p.offset)
        case .padding(let p): self = .padding(length: p.length)
        case .sourceAnchor(let p): self = .sourceAnchor(family: p.family, anchor: Array(p.anchor))
        case .samplesRejected(let p): self = .samplesRejected(p.rejections)
        case .destination(let p): self = .destination(p.destination)
        case .samplesUnacknowledged(let p): self = .samplesUnacknowledged(p.rejections)
        }
    }

    /// Decodes a payload whose frame checksum already matched. Fails when the
    /// type is not defined or the payload does not have its type's shape.
    public static func decode(type rawType: UInt8, payload: UnsafeRawBufferPointer) -> Result<LogRecord, PayloadProblem> {
        RecordView.decode(type: rawType, payload: payload).map(LogRecord.init)
    }
}
