import Foundation

/// Where a store uploads: a server (its id, random, made with its database)
/// and an account on it, with the URL it was reached at and the uploader id
/// the store writes under there. The store's synced flags mean "acknowledged
/// by its current destination" (docs/RECONCILE.md).
public struct StoreDestination: Hashable, Sendable {
    public var serverId: String
    public var user: String
    public var url: String
    public var uploader: UUID
    /// When this record was written.
    public var recordedAtMilliseconds: Int64
    /// When the server was last proven to hold exactly what the store
    /// acknowledged (0: never).
    public var provenEqualAtMilliseconds: Int64

    public init(serverId: String, user: String, url: String, uploader: UUID, recordedAtMilliseconds: Int64,
                provenEqualAtMilliseconds: Int64) {
        self.serverId = serverId
        self.user = user
        self.url = url
        self.uploader = uploader
        self.recordedAtMilliseconds = recordedAtMilliseconds
        self.provenEqualAtMilliseconds = provenEqualAtMilliseconds
    }

    /// The same destination: one server and account, whatever URL reached it.
    public func isSame(as other: StoreDestination) -> Bool { serverId == other.serverId && user == other.user }

    /// Why this destination cannot be recorded, or nil when it can.
    public var validationProblem: String? {
        if serverId.utf8.count > FormatConstants.maxDestinationNameBytes { return "server id is longer than \(FormatConstants.maxDestinationNameBytes) bytes" }
        if user.utf8.count > FormatConstants.maxDestinationNameBytes { return "user is longer than \(FormatConstants.maxDestinationNameBytes) bytes" }
        if url.utf8.count > FormatConstants.maxDestinationURLBytes { return "URL is longer than \(FormatConstants.maxDestinationURLBytes) bytes" }
        return nil
    }
}
