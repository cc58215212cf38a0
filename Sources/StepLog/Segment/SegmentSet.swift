/// Which segment files make up the store, given every segment found in the
/// directory (sorted by sequence): the compaction rule in one place, for the
/// opener and for `steplog verify`.
///
/// Compaction outputs carry the highest input sequence they replace; the last
/// one also carries the final flag and appears last. With the final output
/// present, the compaction committed and its inputs are obsolete; without it,
/// its outputs are.
public struct SegmentSet {
    public var live: [SegmentInfo]
    /// Inputs of a committed compaction that were not deleted yet.
    public var obsoleteInputs: [SegmentInfo] = []
    /// Outputs of a compaction that never committed.
    public var uncommittedOutputs: [SegmentInfo] = []

    public init(resolving segments: [SegmentInfo]) {
        live = segments
        guard let through = segments.filter({ $0.header.isCompactionOutput }).map(\.header.compactedThrough).max() else { return }
        let run = segments.filter { $0.header.isCompactionOutput && $0.header.compactedThrough == through }
        if run.contains(where: { $0.header.isCompactionFinal }) {
            obsoleteInputs = segments.filter { $0.sequence <= through }
        } else {
            uncommittedOutputs = run
        }
        let doomed = Set((obsoleteInputs + uncommittedOutputs).map(\.sequence))
        live.removeAll { doomed.contains($0.sequence) }
    }

    /// The first break in the live segments' chain: a missing sequence number,
    /// a segment that does not start where the previous one ends (or where
    /// its reserved range ends), or one that outgrew its reserved range;
    /// with the file and offset to report it at.
    public static func firstBreak(in live: [SegmentInfo], directory: String)
        -> (index: Int, path: String, offset: Int64, problem: SegmentChainBreak)? {
        for i in live.indices {
            // A segment that reserved a range of positions (a compaction's
            // output) lies inside it, the last one too: a writer continues
            // after it at the range's end.
            let segment = live[i]
            if segment.header.rangeEnd != 0, segment.endPosition > segment.header.rangeEnd {
                // At the range end, or at the start for a range that ends before the segment begins.
                let offset = segment.header.rangeEnd > segment.basePosition ? Int64(segment.header.rangeEnd - segment.basePosition) : 0
                return (i, segment.path, offset, .pastReservedRange(end: segment.endPosition, rangeEnd: segment.header.rangeEnd))
            }
            guard i > 0 else { continue }
            let a = live[i - 1], b = segment
            // A writer segment started during a background compaction follows
            // the numbers and positions reserved for its outputs: before the
            // compaction commits, the segment it reserved after (a gap of
            // unused numbers and positions); after, the compaction's last
            // output, whose range end is this segment's base.
            if b.header.isAfterReservation {
                if a.sequence == b.header.reservedAfter, b.sequence > a.sequence, b.basePosition >= a.nextBasePosition {
                    continue
                }
                if a.header.isCompactionOutput, a.header.compactedThrough >= b.header.reservedAfter, b.sequence > a.sequence,
                   a.header.rangeEnd == b.basePosition, a.endPosition <= a.header.rangeEnd {
                    continue
                }
                return (i, b.path, 0, .afterReservation(name: b.name, reservedAfter: b.header.reservedAfter, previous: a.name,
                                                        previousEnd: a.endPosition, previousNext: a.nextBasePosition))
            }
            if b.sequence != a.sequence + 1 {
                let missing = SegmentName.fileName(sequence: a.sequence + 1)
                return (i, Directory.join(directory, missing), 0, .missing(name: missing, from: a.sequence, to: b.sequence))
            }
            // Each segment starts where the previous one ends, or where its
            // reserved range ends when it has one (version 2's range end).
            if a.header.rangeEnd != 0, b.basePosition != a.header.rangeEnd {
                return (i, a.path, a.size, .reservedRangeMismatch(rangeEnd: a.header.rangeEnd, next: b.basePosition))
            }
            if b.basePosition != a.nextBasePosition {
                return (i, a.path, a.size, b.basePosition > a.endPosition ? .gap(end: a.endPosition, next: b.basePosition)
                                                                          : .overlap(end: a.endPosition, next: b.basePosition))
            }
        }
        return nil
    }
}
