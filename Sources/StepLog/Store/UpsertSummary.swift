/// What one `upsert` call did. Every sample passed counts in exactly one field.
public struct UpsertSummary: Hashable, Sendable {
    /// UUIDs not seen before (or whose deletion was acknowledged): appended, unsynced.
    public var inserted = 0
    /// Known UUIDs whose content changed: appended, unsynced again.
    public var updated = 0
    /// Known UUIDs with identical content and origin: nothing written, synced state kept.
    public var unchanged = 0
    /// UUIDs with a pending deletion: appended again, unsynced (the deletion is void).
    public var revived = 0
    /// Known UUIDs with identical content but another origin: appended with
    /// the new origin, synced state kept (the server sees nothing new).
    public var relabeled = 0

    public init(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0, revived: Int = 0, relabeled: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
        self.revived = revived
        self.relabeled = relabeled
    }

    /// Samples the call was given.
    public var total: Int { inserted + updated + unchanged + revived + relabeled }

    public static func += (a: inout UpsertSummary, b: UpsertSummary) {
        a.inserted += b.inserted
        a.updated += b.updated
        a.unchanged += b.unchanged
        a.revived += b.revived
        a.relabeled += b.relabeled
    }
}
