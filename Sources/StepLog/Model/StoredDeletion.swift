import Foundation

/// A pending deletion as the store holds it: the sample's UUID, when its
/// source deleted it, and the position of its tombstone record (which
/// identifies this deletion: a sample revived and deleted again has another).
public struct StoredDeletion: Hashable, Sendable {
    public var id: UUID
    public var deletedAtMilliseconds: Int64
    public var position: LogPosition

    public init(id: UUID, deletedAtMilliseconds: Int64, position: LogPosition) {
        self.id = id
        self.deletedAtMilliseconds = deletedAtMilliseconds
        self.position = position
    }

    public var deletedAt: Date { Milliseconds.date(deletedAtMilliseconds) }
}
