/// Whether a record still means something, and what compaction keeps of it
/// (`steplog stats` counts the same): a `RecordView` handler.
///
/// Live: the current version of a sample, a pending tombstone, the latest
/// status of a current interval, a current layering range, the latest high
/// score of a day, the latest anchor of a source family, a rejection that
/// still applies (a `samplesRejected` record is live while one of its entries
/// is; so is a `samplesUnacknowledged` record's entry with a reason, kept as a
/// `samplesRejected` record), the latest record of each destination. Everything else (older versions, acknowledgements, acknowledged
/// tombstones, superseded statuses, clears, synced-through and padding
/// records) is dead: what compaction drops.
enum Liveness {
    /// What compaction decides about one record.
    struct Verdict {
        var type: RecordType
        var live = false
        /// Bytes of what compaction keeps, frame included (0 when dead).
        var liveBytes = 0
        /// A synced-through or padding record: what durability costs, counted
        /// apart from dead records (compaction drops them, and its last
        /// output ends with one synced-through record of its own).
        var isSyncMark = false
        /// A sample version whose acknowledgement compaction folds into its flags.
        var foldsAcknowledgement = false
        /// A sample version written acknowledged (flag bit 1) whose acknowledgement
        /// was taken back since (`samplesUnacknowledged`): compaction clears the bit.
        var dropsAcknowledgement = false
        /// A samples-rejected record: the entries that still apply (all that compaction keeps).
        var currentRejections: [SampleRejection]?
    }

    /// Judges `record`, found at `position`, against `state` (the state after
    /// the whole log, or after more of it: a record superseded meanwhile is dead).
    static func judge(_ record: RecordView, at position: LogPosition, in state: StoreState) throws -> Verdict {
        var v = Verdict(type: record.type)
        switch record {
        case .sampleUpsert(let sample):
            // The record at `position` carries this UUID: no read confirms it.
            if let entry = state.index.entry(sample.uuid, at: position) {
                v.live = true
                v.foldsAcknowledgement = entry.isSynced && !sample.isSynced
                v.dropsAcknowledgement = !entry.isSynced && sample.isSynced
            }
        case .sampleDeleted(let tombstone):
            v.live = state.index.entry(tombstone.uuid, at: position) != nil
        case .intervalStatus(let p):
            v.live = state.intervals.entry(id: p.id.uuid)?.position == position
        case .layeringRange:
            v.live = state.intervals.rangePositions.contains(position)
        case .dailyHighScore(let p):
            v.live = state.highScorePositions[p.day] == position
        case .sourceAnchor(let p):
            v.live = state.anchors[p.family]?.position == position
        case .destination(let p):
            v.live = state.destinations[StoreState.DestinationKey(p.destination)]?.position == position
        case .samplesRejected(let p), .samplesUnacknowledged(let p):
            // Only the entries that still apply: a record can outlive some of its samples' versions.
            // (An unacknowledgement is folded into the versions' flags: what is kept of one is the
            // rejections of its entries with a reason, as a samples-rejected record.)
            let rejecting = record.type == .samplesRejected ? p.rejections : p.rejections.filter { !$0.reason.isEmpty }
            let current = try rejecting.filter { try state.isRejectionCurrent(UUIDBytes($0.id), recordedAt: position) }
            if !current.isEmpty {
                v.live = true
                v.currentRejections = current
                v.liveBytes = RecordFrame.size(payload: RejectionPayload.payloadSize(current))
            }
            return v
        case .syncedThrough, .padding:
            v.isSyncMark = true
        case .samplesAcknowledged, .intervalsCleared:
            break
        }
        if v.live { v.liveBytes = record.frameSize }
        return v
    }
}

extension StepLogStore {
    /// Segments, bytes, records and live records of the store as it is,
    /// from one pass over every record.
    public func figures() throws -> StoreFigures {
        try locked {
            var f = StoreFigures()
            for (i, s) in segments.enumerated() {
                f.segments += 1
                f.bytes += (i == segments.count - 1 && writer != nil) ? writer!.endOffset : s.size
                f.headerBytes += s.dataStart
            }
            try scan(from: .zero) { position, record in
                let size = Int64(record.frameSize)
                let v = try Liveness.judge(record, at: position, in: state)
                f.records += 1
                if v.isSyncMark { f.syncMarkBytes += size }
                if v.live {
                    f.liveRecords += 1
                    f.liveBytes += Int64(v.liveBytes)
                }
                f.byType[v.type, default: StoreFigures.TypeFigures()].records += 1
                f.byType[v.type]!.bytes += size
                if v.live {
                    f.byType[v.type]!.liveRecords += 1
                    f.byType[v.type]!.liveBytes += Int64(v.liveBytes)
                }
                return true
            }
            return f
        }
    }
}
