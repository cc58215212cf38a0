/// What the index knows of a sample's latest version: where its record is and
/// whether the server acknowledged it. Packed in 48 bits (47-bit position, one
/// synced bit) so an index slot is 22 bytes.
public struct IndexEntry: Hashable, Sendable {
    public private(set) var rawValue: UInt64

    static let syncedBit: UInt64 = 1 << 47

    public init(position: LogPosition, synced: Bool) {
        precondition(position.rawValue <= FormatConstants.maxPosition, "log position \(position) exceeds the format's 47 bits")
        rawValue = position.rawValue | (synced ? Self.syncedBit : 0)
    }

    init(rawValue: UInt64) { self.rawValue = rawValue }

    public var position: LogPosition { LogPosition(rawValue & FormatConstants.maxPosition) }
    public var isSynced: Bool { rawValue & Self.syncedBit != 0 }

    public func withSynced(_ synced: Bool) -> IndexEntry {
        IndexEntry(rawValue: synced ? rawValue | Self.syncedBit : rawValue & ~Self.syncedBit)
    }
}
