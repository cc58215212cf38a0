/// What one `delete` call did. Every UUID passed counts in exactly one field.
public struct DeleteSummary: Hashable, Sendable {
    /// Live samples now deleted: a tombstone appended, pending until acknowledged.
    public var deleted = 0
    /// UUIDs whose deletion was already pending: nothing written.
    public var alreadyDeleted = 0
    /// UUIDs the store does not hold (never stored, or deleted and acknowledged): nothing written.
    public var unknown = 0

    public init(deleted: Int = 0, alreadyDeleted: Int = 0, unknown: Int = 0) {
        self.deleted = deleted
        self.alreadyDeleted = alreadyDeleted
        self.unknown = unknown
    }

    public var total: Int { deleted + alreadyDeleted + unknown }

    public static func += (a: inout DeleteSummary, b: DeleteSummary) {
        a.deleted += b.deleted
        a.alreadyDeleted += b.alreadyDeleted
        a.unknown += b.unknown
    }
}
