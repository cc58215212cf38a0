/// What a reconcile found and what it corrected in the store
/// (docs/RECONCILE.md). Samples it marked for sending go with the upload that
/// follows.
public struct ReconcileReport: Sendable, Equatable {
    /// The store's destination was another server or account (or none): every
    /// day was compared against the live samples.
    public var newDestination = false
    /// UTC days holding samples in the store or at the server.
    public var daysCompared = 0
    /// Days whose digests differed (the first few in `firstDifferingDays`).
    public var daysDiffering = 0
    public var firstDifferingDays: [String] = []
    /// Acknowledged samples the server does not hold: no longer acknowledged, sent again.
    public var samplesMissing = 0
    /// Acknowledged samples the server holds in another version of this store's: sent again.
    public var versionsDifferent = 0
    /// Ids this store deleted that the server still holds as its own: pending deletions again.
    public var deletionsLost = 0
    /// Samples another store of the same user wrote or deleted later at the
    /// server: left alone there, held back here (rejected with the reason)
    /// until this store's version changes.
    public var heldByAnotherUploader = 0
    /// Samples not marked acknowledged that the server provably holds: marked.
    public var acknowledged = 0
    /// Samples whose version the server rejected while it keeps an older one
    /// of this store's: neither can be repaired (the check keeps finding them).
    public var rejectedWithOlderVersionKept = 0
    /// Requests the reconcile made (digests, day lists, lookups).
    public var requests = 0
    /// Nothing was written (`--dry-run`).
    public var dryRun = false

    public init() {}

    /// Corrections written to the store (or that would be, on a dry run).
    public var corrections: Int { samplesMissing + versionsDifferent + deletionsLost + heldByAnotherUploader + acknowledged }
}
