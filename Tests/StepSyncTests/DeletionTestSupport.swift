import Foundation
@testable import StepLog
@testable import StepSync

/// A provider over a fixed list of samples that also reports deletions, as a
/// HealthKit anchored query would: `deleted` is its deleted objects, `anchor`
/// its new anchor, under `family`.
struct ChangeFeedProvider: StepDataProvider {
    var samples: [StepSample]
    var deleted: [UUID] = []
    var anchor: [UInt8] = [1]
    var family = "feed"
    var range: DateInterval
    var sourceIdentity: String { "feed:\(samples.count):\(anchor)" }
    var deletionFamily: String? { family }

    /// The added samples are served as `FixedProvider` serves its list.
    private var added: FixedProvider { FixedProvider(samples: samples, range: range) }

    func layeringRange(now: Date) async throws -> DateInterval { range }

    func getAggregatedStepCount(for interval: DateInterval) async throws -> Int {
        try await added.getAggregatedStepCount(for: interval)
    }

    func getRawStepSamples(for interval: DateInterval) async throws -> [StepSample] {
        try await added.getRawStepSamples(for: interval)
    }

    func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions {
        SourceDeletions(ids: deleted, anchor: self.anchor)
    }
}

/// What one in-process ingest did.
struct IngestResult {
    var fetched: FetchSummary
    var plan: DeletionPlan?
    var deleted: DeleteSummary
}

/// The ingest command's order, in process: plan the deletions (before
/// anything is written), layer, fetch, apply the deletions.
@discardableResult
func ingestWithDeletions(_ provider: StepDataProvider, into store: StepLogStore,
                         options: DeletionOptions = DeletionOptions()) async throws -> IngestResult {
    let deletion = DeletionService(provider: provider, store: store, options: options, sourceName: provider.sourceIdentity)
    let plan = try await deletion.plan()
    try await LayeringService(provider: provider, store: store).performLayering()
    let fetch = FetchService(provider: provider, store: store)
    fetch.alreadyStored = plan?.deletions.alreadyStored
    let fetched = try await fetch.fetchPending()
    let deleted = try plan.map { try deletion.apply($0) } ?? DeleteSummary()
    return IngestResult(fetched: fetched, plan: plan, deleted: deleted)
}

/// The store's live samples, by id.
func liveSamples(_ store: StepLogStore) throws -> [UUID: StepSample] {
    var result: [UUID: StepSample] = [:]
    try store.forEachSample { result[$0.sample.id] = $0.sample }
    return result
}

/// The provider's samples over `range`, by id.
func providerSamples(_ provider: StepDataProvider, _ range: DateInterval) async throws -> [UUID: StepSample] {
    var result: [UUID: StepSample] = [:]
    for s in try await provider.getRawStepSamples(for: range) { result[s.id] = s }
    return result
}

/// What a killed-then-finished ingest must leave, compared with a clean run:
/// the exported samples, the deletions waiting for upload, and the anchor.
struct KillOutcome: Equatable {
    var export: [String]
    var pendingDeletions: Set<UUID>
    var anchor: [UInt8]?

    static func of(_ store: String, stepsync: String, family: String) throws -> KillOutcome {
        let export = try runProgram(stepsync, ["export", "--store", store]).lines
        let s = try readOnly(store)
        defer { try? s.close() }
        return KillOutcome(export: export, pendingDeletions: Set(try s.pendingDeletions(limit: 1_000_000).map(\.id)),
                           anchor: s.sourceAnchor(family: family))
    }

    static func readOnly(_ path: String) throws -> StepLogStore {
        var options = StoreOptions()
        options.readOnly = true
        return try StepLogStore.open(path, options: options)
    }
}
