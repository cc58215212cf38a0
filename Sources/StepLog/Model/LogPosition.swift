/// A byte address in the store's whole history: a segment's base position plus
/// an offset inside it. Positions only grow (compaction writes above the old
/// end), so a position names one record for the life of the store.
public struct LogPosition: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt64

    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    public static let zero = LogPosition(0)

    public static func < (a: LogPosition, b: LogPosition) -> Bool { a.rawValue < b.rawValue }

    public var description: String { "@\(rawValue)" }
}
