/// Parsed records of part of one segment, in log order.
struct Chunk: Sendable {
    struct Other: Sendable {
        var type: UInt8
        var payload: [UInt8]
        var offset: Int64
        var position: LogPosition
    }

    var segmentIndex: Int
    /// Record types in order; sample versions and tombstones take the next
    /// key/entry, others the next `Other`.
    var kinds: [UInt8] = []
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
        kinds.reserveCapacity(reserving)
        keys.reserveCapacity(reserving)
        entries.reserveCapacity(reserving)
    }
}
