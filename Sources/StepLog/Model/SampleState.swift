/// What the store knows of one UUID.
public enum SampleState: Hashable, Sendable {
    /// A current version (synced or not).
    case live(StoredSample)
    /// Deleted at its source; the deletion waits for the server's acknowledgement.
    case deletionPending(StoredDeletion)
    /// Never stored, or deleted and acknowledged.
    case absent
}
