/// What the index knows of a sample's current version: where its record is,
/// whether the server acknowledged it, whether it is a tombstone (a deletion
/// waiting for the server), and, for a live version, its origin label (so the
/// store counts its live samples by origin without reading them). Packed in
/// 50 bits (46-bit position, synced bit 46, tombstone bit 47, origin bits
/// 48...49) so an index slot, with its 46-bit tag, is 12 bytes.
public struct IndexEntry: Hashable, Sendable {
    public private(set) var rawValue: UInt64

    static let syncedBit: UInt64 = 1 << 46
    static let tombstoneBit: UInt64 = 1 << 47
    static let originShift: UInt64 = 48

    /// A sample version (or, with `tombstone`, a pending deletion, whose origin is unspecified).
    public init(position: LogPosition, synced: Bool, tombstone: Bool = false, origin: SampleOrigin = .unspecified) {
        precondition(position.rawValue <= FormatConstants.maxPosition, "log position \(position) exceeds the index's 46 bits")
        rawValue = position.rawValue | (synced ? Self.syncedBit : 0) | (tombstone ? Self.tombstoneBit : 0)
            | UInt64(origin.rawValue) << Self.originShift
    }

    /// A pending deletion: the tombstone record at `position`.
    public static func tombstone(at position: LogPosition) -> IndexEntry {
        IndexEntry(position: position, synced: false, tombstone: true)
    }

    init(rawValue: UInt64) { self.rawValue = rawValue }

    public var position: LogPosition { LogPosition(rawValue & FormatConstants.maxPosition) }
    public var isSynced: Bool { rawValue & Self.syncedBit != 0 }
    public var isTombstone: Bool { rawValue & Self.tombstoneBit != 0 }
    /// The origin label of a live version (`.unspecified` for a tombstone).
    public var origin: SampleOrigin { SampleOrigin(rawValue: UInt8(truncatingIfNeeded: originCode))! }
    /// `origin`'s raw value, as an index into `SampleOriginCounts`.
    @inline(__always)
    var originCode: Int { Int(truncatingIfNeeded: rawValue >> Self.originShift & 0b11) }
    /// A live sample version the server has not acknowledged (neither bit set).
    @inline(__always)
    var isUnsyncedLive: Bool { rawValue & (Self.syncedBit | Self.tombstoneBit) == 0 }

    public func withSynced(_ synced: Bool) -> IndexEntry {
        IndexEntry(rawValue: synced ? rawValue | Self.syncedBit : rawValue & ~Self.syncedBit)
    }
}
