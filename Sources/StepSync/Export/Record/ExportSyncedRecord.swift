import Foundation

/// A step record that carried HealthKit's sync metadata
/// (`HKMetadataKeySyncIdentifier`, `HKMetadataKeySyncVersion`): an app
/// that saves a sample with the same sync identifier and a higher version
/// replaces the older one. Sync identifiers are scoped by the app, which the
/// export names only by `sourceName`.
public struct ExportSyncedRecord: Sendable, Equatable {
    /// The record's derived sample id.
    public var id: UUID
    public var startMilliseconds: Int64
    /// The record's `sourceName` (the sync identifier's scope).
    public var sourceName: String
    public var syncIdentifier: String
    /// The `HKMetadataKeySyncVersion` as an integer; nil when absent or not
    /// an integer (such a record replaces nothing and is never replaced).
    public var syncVersion: Int64?

    public init(id: UUID, startMilliseconds: Int64, sourceName: String, syncIdentifier: String, syncVersion: Int64?) {
        self.id = id
        self.startMilliseconds = startMilliseconds
        self.sourceName = sourceName
        self.syncIdentifier = syncIdentifier
        self.syncVersion = syncVersion
    }
}
