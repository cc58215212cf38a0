import Foundation

/// The deletions an ingest will apply, decided before anything is written.
public struct DeletionPlan: Sendable {
    public var family: String
    public var deletions: SourceDeletions
}
