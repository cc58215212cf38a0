/// How the live segments fail to follow each other (`SegmentSet.firstBreak`):
/// each starts where the one before it ends, or where that one's reserved
/// range ends, with the next sequence number (or, after a reservation, past
/// the numbers and positions reserved for a compaction's outputs).
public enum SegmentChainBreak: Equatable, Sendable, CustomStringConvertible {
    /// The file of sequence `missing` is not there.
    case missing(name: String, from: UInt64, to: UInt64)
    /// A segment started after a reservation does not follow the segment it
    /// reserved after, nor that compaction's last output.
    case afterReservation(name: String, reservedAfter: UInt64, previous: String, previousEnd: UInt64, previousNext: UInt64)
    /// A segment that reserved a range of positions outgrew it.
    case pastReservedRange(end: UInt64, rangeEnd: UInt64)
    /// The next segment does not start where a reserved range ends.
    case reservedRangeMismatch(rangeEnd: UInt64, next: UInt64)
    /// Bytes are missing between a segment's end and the next one's start.
    case gap(end: UInt64, next: UInt64)
    /// The next segment starts before this one ends.
    case overlap(end: UInt64, next: UInt64)

    public var description: String {
        switch self {
        case .missing(let name, let from, let to):
            "segment \(name) is missing (sequence jumps from \(from) to \(to))"
        case .afterReservation(let name, let reservedAfter, let previous, let previousEnd, let previousNext):
            "segment \(name) follows positions reserved after segment \(reservedAfter), but the segment before it is \(previous) (ending at position \(previousEnd), next at \(previousNext))"
        case .pastReservedRange(let end, let rangeEnd):
            "segment ends at position \(end), past the end of its reserved range (\(rangeEnd))"
        case .reservedRangeMismatch(let rangeEnd, let next):
            "segment reserved positions up to \(rangeEnd) but the next starts at \(next)"
        case .gap(let end, let next):
            "segment ends at position \(end) but the next starts at \(next): \(next - end) bytes are missing"
        case .overlap(let end, let next):
            "segment ends at position \(end), after the next one starts (\(next))"
        }
    }
}
