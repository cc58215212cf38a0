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

    /// Every entry in time order (by start, then end, then id).
    public mutating func sortedEntries() -> [Entry] {
        if sortedCache == nil {
            // Ties (the same range under two ids) by id: every open lists them
            // alike, whatever order the dictionary holds (found by fuzzing
            // store-open: a read-only open and a writer's open differed).
            sortedCache = entries.values.map { ($0.interval, UUIDBytes($0.interval.id)) }.sorted {
                ($0.0.startMilliseconds, $0.0.endMilliseconds, $0.1.high, $0.1.low)
                    < ($1.0.startMilliseconds, $1.0.endMilliseconds, $1.1.high, $1.1.low)
            }.map(\.0.id)
        }
        return sortedCache!.map { entries[$0]! }
    }

    /// Calls `body` for every entry (no defined order).
    public func forEach(_ body: (Entry) throws -> Void) rethrows {
        for e in entries.values { try body(e) }
    }
}
