import Foundation
import StepLog

/// Stage 2b: the source's deletions into the store, as tombstones.
///
/// `plan()` asks the provider, with the anchor the store holds for its family,
/// and applies the guards; it only reads, so a refusal leaves the store
/// byte-identical. `apply(_:)` runs after the fetch: it deletes in batches of
/// 1,000, each synced (as the fetch syncs its batches: a long deletion pass
/// keeps what it did when stopped or killed), then records the provider's
/// new anchor and syncs again.
/// Killed at any moment, the next run plans from the same anchor and gets the
/// same deletions; tombstones that survived make `delete` write nothing for
/// those UUIDs (the contract: deletions are idempotent), so the store ends in
/// the same state as a clean run.
public final class DeletionService {
    /// A snapshot may delete at most this fraction of the stored samples it
    /// was compared with, unless `allowMassDeletion`.
    public static let maxDeletedFraction = 0.05
    public static let batchSize = 1_000

    private let provider: StepDataProvider
    private let store: StepLogStore
    private let options: DeletionOptions
    private let sourceName: String
    private let stop: StopSignal?
    private let now: () -> Date
    /// Called after each batch with (deletions applied, deletions planned).
    public var onProgress: ((Int, Int) -> Void)?

    public init(provider: StepDataProvider, store: StepLogStore, options: DeletionOptions = DeletionOptions(),
                sourceName: String, stop: StopSignal? = nil, now: @escaping () -> Date = Date.init) {
        self.provider = provider
        self.store = store
        self.options = options
        self.sourceName = sourceName
        self.stop = stop
        self.now = now
    }

    /// The deletions to apply, or nil when the provider reports none (no
    /// `deletionFamily`) or `keepDeleted`. Writes nothing. Throws the
    /// provider's refusal or `DeletionRefusal.tooManyDeletions`.
    public func plan() async throws -> DeletionPlan? {
        guard !options.keepDeleted, let family = provider.deletionFamily else { return nil }
        let deletions = try await provider.deletedSamples(since: store.sourceAnchor(family: family), in: store)
        if let base = deletions.comparedWith, !options.allowMassDeletion,
           Double(deletions.losses) > Double(base) * Self.maxDeletedFraction {
            throw DeletionRefusal.tooManyDeletions(source: sourceName, deleting: deletions.losses, comparedWith: base)
        }
        return DeletionPlan(family: family, deletions: deletions)
    }

    /// Writes the planned deletions as tombstones, then the anchor (unless it
    /// is empty: a provider with nothing to anchor, or unchanged); both
    /// durable when it returns. Throws `StoppedByRequest` between batches when
    /// a stop is requested (what was written is synced; the anchor is not
    /// recorded, so the next run plans the same deletions again).
    @discardableResult
    public func apply(_ plan: DeletionPlan) throws -> DeleteSummary {
        let summary = try Self.delete(plan.deletions.ids, from: store, stop: stop, now: now, onProgress: onProgress)
        if !plan.deletions.anchor.isEmpty, store.sourceAnchor(family: plan.family) != plan.deletions.anchor {
            try store.recordSourceAnchor(family: plan.family, anchor: plan.deletions.anchor)
            try store.sync()
        }
        return summary
    }

    /// Deletes `ids` from `store` as tombstones, `batchSize` a batch, each
    /// synced, calling `onProgress` after each with (deleted so far, all).
    /// Throws `StoppedByRequest` between batches when a stop is requested
    /// (what was written is synced). Ingest's deletions and
    /// `stepsync forget` both go this way.
    public static func delete(_ ids: [UUID], from store: StepLogStore, stop: StopSignal?, now: () -> Date = Date.init,
                              onProgress: ((Int, Int) -> Void)? = nil) throws -> DeleteSummary {
        var summary = DeleteSummary()
        var from = 0
        while from < ids.count {
            if stop?.isRequested == true {
                try store.sync()
                throw StoppedByRequest(stage: "deleting")
            }
            let to = min(ids.count, from + batchSize)
            summary += try store.delete(ids[from..<to], at: now())
            try store.sync()
            from = to
            onProgress?(from, ids.count)
        }
        return summary
    }
}
