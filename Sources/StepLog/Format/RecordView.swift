/// One checksummed record, decoded once: its type checked against the
/// segment's format version and its payload against the type's shape, and
/// handed on as a typed view of the payload's bytes (nothing copied; a view is
/// valid only while the bytes it was read from are).
///
/// Everything that gives records meaning is a *handler*: one exhaustive
/// `switch` over this enum, with no `default:`, so that a new record type is
/// a compile error in each of them until it says what that type means there
/// (LevelDB's `WriteBatch::Iterate(Handler*)`). The handlers:
/// - `StoreState.replay` — what a record does to the in-memory state (replay, on the applying thread);
/// - `ReplayChunk.add` — replay's reading thread: sample versions become index entries, the rest waits for the applier;
/// - `SegmentSnapshot.Contribution.of` — what a record puts in its segment's index snapshot;
/// - `Liveness.judge` — whether compaction keeps a record, and in what form (also `steplog stats`);
/// - `StoreVerifier.RecordCheck.check` — what `steplog verify` checks beyond replaying;
/// - `LogRecord.init(_:)` — the owned, decoded form (dump, tests, fuzzing).
/// The format's codecs are the payload types themselves (`SamplePayload`, …).
public enum RecordView {
    case sampleUpsert(SamplePayload)
    case samplesAcknowledged(AcknowledgedPayload)
    case intervalStatus(IntervalStatusPayload)
    case intervalsCleared(IntervalsClearedPayload)
    case layeringRange(LayeringRangePayload)
    case dailyHighScore(DailyHighScorePayload)
    case sampleDeleted(TombstonePayload)
    case syncedThrough(SyncedThroughPayload)
    case padding(PaddingPayload)
    case sourceAnchor(SourceAnchorPayload)
    case samplesRejected(RejectionPayload)
    case destination(DestinationPayload)
    /// The entries of a `samplesRejected` payload (an empty reason: acknowledgement lost alone).
    case samplesUnacknowledged(RejectionPayload)

    /// Decodes the payload of a record whose frame checksum matched, found in
    /// a segment of format `version`. Fails when the type is not defined in
    /// that version or the payload does not have its type's shape: both are
    /// corruption, never an unsynced tail (the checksum matched).
    @inline(__always)
    public static func decode(type rawType: UInt8, payload: UnsafeRawBufferPointer,
                              version: UInt16 = FormatConstants.formatVersion) -> Result<RecordView, PayloadProblem> {
        guard let type = RecordType(rawValue: rawType) else { return .failure(.unknownType(rawType)) }
        guard type.sinceVersion <= version else { return .failure(.undefinedInVersion(rawType, version: version)) }
        switch type {
        case .sampleUpsert: return SamplePayload.checked(payload, version: version).map { .sampleUpsert($0) }
        case .samplesAcknowledged: return AcknowledgedPayload.checked(payload).map { .samplesAcknowledged($0) }
        case .intervalStatus: return IntervalStatusPayload.checked(payload).map { .intervalStatus($0) }
        case .intervalsCleared: return IntervalsClearedPayload.checked(payload).map { .intervalsCleared($0) }
        case .layeringRange: return LayeringRangePayload.checked(payload).map { .layeringRange($0) }
        case .dailyHighScore: return DailyHighScorePayload.checked(payload).map { .dailyHighScore($0) }
        case .sampleDeleted: return TombstonePayload.checked(payload).map { .sampleDeleted($0) }
        case .syncedThrough: return SyncedThroughPayload.checked(payload).map { .syncedThrough($0) }
        case .padding: return PaddingPayload.checked(payload).map { .padding($0) }
        case .sourceAnchor: return SourceAnchorPayload.checked(payload).map { .sourceAnchor($0) }
        case .samplesRejected: return RejectionPayload.checked(payload).map { .samplesRejected($0) }
        case .destination: return DestinationPayload.checked(payload).map { .destination($0) }
        case .samplesUnacknowledged: return RejectionPayload.checked(payload, as: .samplesUnacknowledged).map { .samplesUnacknowledged($0) }
        }
    }

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

    /// The payload's bytes.
    public var payload: UnsafeRawBufferPointer {
        switch self {
        case .sampleUpsert(let p): p.bytes
        case .samplesAcknowledged(let p): p.bytes
        case .intervalStatus(let p): p.bytes
        case .intervalsCleared(let p): p.bytes
        case .layeringRange(let p): p.bytes
        case .dailyHighScore(let p): p.bytes
        case .sampleDeleted(let p): p.bytes
        case .syncedThrough(let p): p.bytes
        case .padding(let p): p.bytes
        case .sourceAnchor(let p): p.bytes
        case .samplesRejected(let p): p.bytes
        case .destination(let p): p.bytes
        case .samplesUnacknowledged(let p): p.bytes
        }
    }

    /// Bytes the record takes on disk, frame included.
    public var frameSize: Int { RecordFrame.size(payload: payload.count) }
}
