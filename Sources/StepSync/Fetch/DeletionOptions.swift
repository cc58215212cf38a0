import Foundation

/// How an ingest treats a source's deletions.
public struct DeletionOptions: Sendable, Equatable {
    /// Apply a snapshot's deletions even past `DeletionService.maxDeletedFraction`.
    public var allowMassDeletion = false
    /// Ask for no deletions and record no anchor: the ingest only adds (the
    /// behaviour before deletions existed).
    public var keepDeleted = false

    public init(allowMassDeletion: Bool = false, keepDeleted: Bool = false) {
        self.allowMassDeletion = allowMassDeletion
        self.keepDeleted = keepDeleted
    }
}
