/// What a power loss may do to bytes and names that no sync made durable.
public enum CrashModel: String, CaseIterable, Sendable {
    /// ext4 with data=ordered: each unsynced 4 KiB page of a file persists
    /// or not, in any subset (never torn inside a page); metadata (names,
    /// sizes) persists as a prefix of its journal, committed by any sync.
    case ext4
    /// ALICE's / SQLite's crash-VFS model: unsynced 512-byte sectors persist
    /// in any subset, a sector being written may hold garbage, a name
    /// operation persists only through a sync of its directory, and a size
    /// change only through a sync of its file.
    case strict

    /// The unit of persistence.
    public var unit: Int { self == .ext4 ? 4096 : 512 }
    /// Whether a unit being written may persist as garbage.
    public var tearsUnits: Bool { self == .strict }
}
