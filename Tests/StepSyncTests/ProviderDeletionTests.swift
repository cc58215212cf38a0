import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The provider contract's deletions through the pipeline: a change feed
/// that consolidates, deletes and replaces; idempotence; a stop between the
/// deletions and the anchor.
@Suite struct ProviderDeletionTests {
    static let base: Int64 = 1_700_000_000_000
    static let range = DateInterval(start: Milliseconds.date(base), end: Milliseconds.date(base + 86_400_000))

    static func sample(_ k: UInt64, minute: Int64, count: Int, device: String = "iPhone") -> StepSample {
        StepSample(id: DerivedUUID.make(99, k), startMilliseconds: base + minute * 60_000,
                   endMilliseconds: base + minute * 60_000 + 50_000, count: count,
                   sourceBundleId: "com.example", sourceDeviceName: device)
    }

    /// S: ten samples a few minutes apart.
    static let original = (0..<10).map { sample(UInt64($0), minute: Int64($0) * 3, count: 30 + $0) }

    /// Health's later state: s0 + s1 consolidated into one new sample with the
    /// sum, s2 deleted, s3 replaced (a higher sync version: a new UUID, the
    /// same span, another count).
    static func laterState() -> ChangeFeedProvider {
        let s = original
        var replaced = s[3]
        replaced.id = DerivedUUID.make(99, 1003)
        replaced.count = s[3].count + 7
        var consolidated = s[0]
        consolidated.id = DerivedUUID.make(99, 1000)
        consolidated.endMilliseconds = s[1].endMilliseconds
        consolidated.count = s[0].count + s[1].count
        return ChangeFeedProvider(samples: [consolidated, replaced] + s[4...], deleted: [s[0].id, s[1].id, s[2].id, s[3].id],
                                  anchor: [2], range: range)
    }

    @Test func consolidationDeletionAndReplacementLeaveExactlyTheProvidersSamples() async throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        defer { try? store.close() }
        let first = ChangeFeedProvider(samples: Self.original, range: Self.range)
        let r1 = try await ingestWithDeletions(first, into: store)
        #expect(r1.fetched.samples.inserted == 10 && r1.deleted == DeleteSummary())
        #expect(store.sourceAnchor(family: "feed") == [1])

        let later = Self.laterState()
        let r2 = try await ingestWithDeletions(later, into: store)
        #expect(r2.fetched.samples.inserted == 2)
        #expect(r2.deleted == DeleteSummary(deleted: 4))
        let live = try liveSamples(store)
        let wanted = try await providerSamples(later, Self.range)
        #expect(live == wanted)          // ids and content
        #expect(live.count == 8)
        #expect(store.sourceAnchor(family: "feed") == [2])
        let pending = Set(try store.pendingDeletions(limit: 100).map(\.id))
        #expect(pending == Set(later.deleted))
        for id in later.deleted { #expect(try store.sample(id: id) == nil) }

        // Again, after a reopen: nothing is written, not a byte.
        try store.close()
        let bytes = try storeFiles(tmp.sub("store"))
        let reopened = try StepLogStore.open(tmp.sub("store"))
        defer { try? reopened.close() }
        let r3 = try await ingestWithDeletions(later, into: reopened)
        #expect(r3.deleted == DeleteSummary(alreadyDeleted: 4) && r3.fetched.samples.inserted == 0)
        #expect(try liveSamples(reopened) == wanted)
        #expect(reopened.sourceAnchor(family: "feed") == [2])
        try reopened.close()
        #expect(try storeFiles(tmp.sub("store")) == bytes)
    }

    @Test func aStopBetweenBatchesLeavesTheAnchorAndTheNextRunFinishes() async throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        defer { try? store.close() }
        // 2,500 samples, then a state with 2,100 of them deleted: three batches.
        let many = (0..<2_500).map { Self.sample(UInt64(10_000 + $0), minute: Int64($0) / 3, count: 10) }
        try await ingestWithDeletions(ChangeFeedProvider(samples: many, range: Self.range), into: store)
        let later = ChangeFeedProvider(samples: Array(many[2_100...]), deleted: many[..<2_100].map(\.id), anchor: [9],
                                       range: Self.range)
        let stop = StopSignal()
        let deletion = DeletionService(provider: later, store: store, sourceName: "feed", stop: stop)
        deletion.onProgress = { done, _ in if done >= 1_000 { stop.request() } }
        let plan = try #require(try await deletion.plan())
        #expect(plan.deletions.ids.count == 2_100)
        #expect(throws: StoppedByRequest.self) { try deletion.apply(plan) }
        #expect(store.sourceAnchor(family: "feed") == [1])   // not yet: the next run asks again
        #expect(try store.pendingDeletions(limit: 10_000).count == 1_000)

        let r = try await ingestWithDeletions(later, into: store)
        #expect(r.deleted == DeleteSummary(deleted: 1_100, alreadyDeleted: 1_000))
        #expect(try liveSamples(store) == (try await providerSamples(later, Self.range)))
        #expect(store.sourceAnchor(family: "feed") == [9])
    }

    @Test func keepDeletedAsksForNothingAndRecordsNoAnchor() async throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        defer { try? store.close() }
        try await ingestWithDeletions(ChangeFeedProvider(samples: Self.original, range: Self.range), into: store)
        let r = try await ingestWithDeletions(Self.laterState(), into: store, options: DeletionOptions(keepDeleted: true))
        #expect(r.plan == nil && r.deleted == DeleteSummary())
        #expect(try liveSamples(store).count == 12)     // the old ten and the two new
        #expect(store.sourceAnchor(family: "feed") == [1])
    }

    @Test func aProviderWithoutDeletionsIsAdditive() async throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        defer { try? store.close() }
        let fixed = FixedProvider(samples: Self.original, range: Self.range)
        #expect(fixed.deletionFamily == nil)
        let r = try await ingestWithDeletions(fixed, into: store)
        #expect(r.plan == nil)
        #expect(try liveSamples(store).count == 10)
    }
}
