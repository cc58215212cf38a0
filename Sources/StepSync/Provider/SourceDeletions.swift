import Foundation
import StepLog

/// What a provider reports beside its samples, as `HKAnchoredObjectQuery`
/// does: the samples that no longer exist and the anchor that continues from
/// here (`StepDataProvider.deletedSamples(since:in:)`).
public struct SourceDeletions: Sendable {
    /// UUIDs of samples that no longer exist at the source; may name samples
    /// the store does not hold (then nothing is written for them).
    public var ids: [UUID]
    /// The provider's state after these deletions, recorded in the store
    /// (`recordSourceAnchor`) once they are durable. At most 65,536 bytes;
    /// empty means "nothing to record" (the store keeps what it had).
    public var anchor: [UInt8]
    /// For a snapshot (an export): how many stored samples it was compared
    /// with — the base of the ingest's mass-deletion guard. Nil for a change
    /// feed, whose deletions are the source's own word and are not guarded.
    public var comparedWith: Int?
    /// Of `ids`, how many the source still has in another form — a sample
    /// re-identified by a newer derivation, a newer sync version an app saved,
    /// the same span and count under a renamed device: not losses, so not
    /// counted by the mass-deletion guard.
    public var withReplacement: Int
    /// Of `withReplacement`: samples an app replaced by saving a newer sync
    /// version (`HKMetadataKeySyncVersion`), reported as replaced.
    public var replacedBySyncVersion = 0

    public init(ids: [UUID], anchor: [UInt8], comparedWith: Int? = nil, withReplacement: Int = 0) {
        self.ids = ids
        self.anchor = anchor
        self.comparedWith = comparedWith
        self.withReplacement = withReplacement
    }

    /// For a snapshot that found, while comparing, samples the store already
    /// holds exactly as it serves them: true for those, so the fetch skips
    /// reading their stored version back (it would find it unchanged). Nil
    /// when the provider knows nothing of the kind.
    public var alreadyStored: (@Sendable (StepSample) -> Bool)?

    /// The deletions the guard weighs: those with no replacement.
    public var losses: Int { ids.count - withReplacement }
}
