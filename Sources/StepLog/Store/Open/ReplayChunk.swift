/// Records of part of one segment, read and checked by replay's reading
/// thread and applied in log order by the applying thread
/// (`ReplayPipeline`). Sample versions and tombstones arrive as the index
/// entries they make; every other record as its bytes, which the applier
/// hands to `StoreState.replay`.
struct ReplayChunk: Sendable {
    struct Other: Sendable {
        var type: UInt8
        var payload: [UInt8]
        var offset: Int64
        var position: LogPosition
    }

    var segmentIndex: Int
    /// For each record in order: true for a sample version or tombstone
    /// (the next key and entry), false for another record (the next `Other`).
    var isVersion: [Bool] = []
    var keys: [UUIDBytes] = []
    var entries: [IndexEntry] = []
    var others: [Other] = []
    /// Bytes of payload copied into `others`.
    var payloadBytes = 0
    /// Set on the last chunk of its segment: where the segment's records end.
    var dataEnd: Int64?
    /// The checked snapshot this chunk applies (instead of the arrays above).
    var snapshot: SegmentSnapshot.Checked?

    /// `reserving`: records to make room for (a full chunk by default).
    init(segmentIndex: Int, reserving: Int = ReplayPipeline.chunkRecords) {
        self.segmentIndex = segmentIndex
        guard reserving > 0 else { return }
        isVersion.reserveCapacity(reserving)
        keys.reserveCapacity(reserving)
        entries.reserveCapacity(reserving)
    }

    var count: Int { isVersion.count }

    /// Takes one record found at `offset` (log `position`): what replay's
    /// reading thread does with each record type (a `RecordView` handler).
    @inline(__always)
    mutating func add(_ record: RecordView, offset: Int64, position: LogPosition) {
        switch record {
        case .sampleUpsert(let sample):
            addVersion(sample.uuid, IndexEntry(version: sample, at: position))
        case .sampleDeleted(let tombstone):
            addVersion(tombstone.uuid, .tombstone(at: position))
        case .samplesAcknowledged, .intervalStatus, .intervalsCleared, .layeringRange, .dailyHighScore,
             .syncedThrough, .padding, .sourceAnchor, .samplesRejected, .destination, .samplesUnacknowledged:
            isVersion.append(false)
            others.append(Other(type: record.type.rawValue, payload: Array(record.payload), offset: offset, position: position))
            payloadBytes += record.payload.count
        }
    }

    @inline(__always)
    private mutating func addVersion(_ key: UUIDBytes, _ entry: IndexEntry) {
        isVersion.append(true)
        keys.append(key)
        entries.append(entry)
    }
}
