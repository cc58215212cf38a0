/// What the index knows of a sample's current version: where its record is,
/// whether the server acknowledged it, and whether it is a tombstone (a
/// deletion waiting for the server). Packed in 48 bits (46-bit position,
/// synced bit 46, tombstone bit 47) so an index slot, with its 48-bit tag,
/// is 12 bytes.
public struct IndexEntry: Hashable, Sendable {
    public private(set) var rawValue: UInt64

    static let syncedBit: UInt64 = 1 << 46
    static let tombstoneBit: UInt64 = 1 << 47

    public init(position: LogPosition, synced: Bool, tombstone: Bool = false) {
        precondition(position.rawValue <= FormatConstants.maxPosition, "log position \(position) exceeds the index's 46 bits")
        rawValue = position.rawValue | (synced ? Self.syncedBit : 0) | (tombstone ? Self.tombstoneBit : 0)
    }

    /// A pending deletion: the tombstone record at `position`.
    public static func tombstone(at position: LogPosition) -> IndexEntry {
        IndexEntry(position: position, synced: false, tombstone: true)
    }

    init(rawValue: UInt64) { self.rawValue = rawValue }

    public var position: LogPosition { LogPosition(rawValue & FormatConstants.maxPosition) }
    public var isSynced: Bool { rawValue & Self.syncedBit != 0 }
    public var isTombstone: Bool { rawValue & Self.tombstoneBit != 0 }
    /// A live sample version the server has not acknowledged (neither bit set).
    @inline(__always)
    var isUnsyncedLive: Bool { rawValue & (Self.syncedBit | Self.tombstoneBit) == 0 }

    public func withSynced(_ synced: Bool) -> IndexEntry {
        IndexEntry(rawValue: synced ? rawValue | Self.syncedBit : rawValue & ~Self.syncedBit)
    }
}
