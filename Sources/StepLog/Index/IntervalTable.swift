import Foundation

/// The layering's intervals and ranges as the log has them now: the latest
/// status of each interval (by id), counts by status, and the ranges layering
/// set out to cover. Everything before an `intervalsCleared` record is gone.
public struct IntervalTable {
    public struct Entry: Hashable, Sendable {
        public var interval: SyncInterval
        /// Position of the status record that set the current status.
        public var position: LogPosition
    }

    private var entries: [UUID: Entry] = [:]
    private var countsByStatus = [Int](repeating: 0, count: 5)
    public private(set) var ranges: [LayeringRange] = []
    /// Position of the record that set each of `ranges`.
    public private(set) var rangePositions: [LogPosition] = []
    /// Cached `entries` sorted by start; rebuilt after the set of ids changes.
    private var sortedCache: [UUID]?

    public init() {}

    public var count: Int { entries.count }

    public func count(of status: IntervalStatus) -> Int { countsByStatus[Int(status.rawValue)] }

    public func entry(id: UUID) -> Entry? { entries[id] }

    public mutating func apply(_ interval: SyncInterval, at position: LogPosition) {
        if let old = entries[interval.id] {
            countsByStatus[Int(old.interval.status.rawValue)] -= 1
        } else {
            sortedCache = nil
        }
        entries[interval.id] = Entry(interval: interval, position: position)
        countsByStatus[Int(interval.status.rawValue)] += 1
    }

    public mutating func applyRange(_ range: LayeringRange, at position: LogPosition) {
        if !ranges.contains(range) {
            ranges.append(range)
            rangePositions.append(position)
        }
    }

    public mutating func clear() {
        entries.removeAll()
        countsByStatus = [Int](repeating: 0, count: 5)
        ranges.removeAll()
        rangePositions.removeAll()
        sortedCache = nil
    }

    /// Every entry in time order (by start, then end).
    public mutating func sortedEntries() -> [Entry] {
        if sortedCache == nil {
            sortedCache = entries.values.sorted {
                ($0.interval.startMilliseconds, $0.interval.endMilliseconds) < ($1.interval.startMilliseconds, $1.interval.endMilliseconds)
            }.map(\.interval.id)
        }
        return sortedCache!.map { entries[$0]! }
    }

    /// Calls `body` for every entry (no defined order).
    public func forEach(_ body: (Entry) throws -> Void) rethrows {
        for e in entries.values { try body(e) }
    }
}
