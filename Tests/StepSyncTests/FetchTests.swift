import Foundation
import Testing
@testable import StepLog
@testable import StepSync

@Suite struct FetchTests {
    let now = Milliseconds.date(testEndDay * day + 12 * 3_600_000)

    func ingest(_ store: StepLogStore, _ provider: StepDataProvider, stop: StopSignal? = nil) async throws -> FetchSummary {
        try await LayeringService(provider: provider, store: store, stop: stop, now: { self.now }).performLayering()
        return try await FetchService(provider: provider, store: store, stop: stop).fetchPending()
    }

    @Test func fetchStoresEverySampleAndMarksIntervalsFetched() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let provider = mock(days: 40)
        let summary = try await ingest(store, provider)
        let all = try await provider.getRawStepSamples(for: interval(0, (testEndDay + 1) * day))
        #expect(summary.samples.inserted == all.count)
        #expect(store.counts.samples == all.count && store.counts.unsyncedSamples == all.count)
        #expect(store.counts.intervals[.pending] == 0)
        #expect(store.intervals().allSatisfy { $0.status == .fetched || $0.status == .empty })
        for s in all.prefix(100) { #expect(try store.sample(id: s.id)?.sample == s) }
        #expect(summary.batches == (all.count + 999) / 1_000)
    }

    @Test func ingestingTwiceChangesNothing() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        _ = try await ingest(store, mock(days: 40))
        let bytes = store.counts.bytes
        let export = try SampleExport.sortedByStart(store)
        let again = try await ingest(store, mock(days: 40))
        #expect(again.samplesSeen == 0 && again.intervalsFetched == 0)
        #expect(store.counts.bytes == bytes)
        // Even a full re-fetch (--restart) writes no sample: every one is unchanged.
        try LayeringService(provider: mock(days: 40), store: store).clearAllIntervals()
        let refetch = try await ingest(store, mock(days: 40))
        #expect(refetch.samples == UpsertSummary(unchanged: export.count))
        #expect(try SampleExport.sortedByStart(store) == export)
    }

    @Test func aStopFinishesTheBatchAndTheNextRunContinues() async throws {
        let dir = TemporaryDirectory()
        var store = try StepLogStore.open(dir.path)
        let stop = StopSignal()
        try await LayeringService(provider: mock(days: 40), store: store, now: { self.now }).performLayering()
        let provider = RecordingProvider(mock(days: 40))
        provider.stopAfterQueries = (10, stop)
        await #expect(throws: StoppedByRequest.self) { try await FetchService(provider: provider, store: store, stop: stop).fetchPending() }
        let fetchedIntervals = store.intervals(status: .fetched)
        #expect(!fetchedIntervals.isEmpty)
        // Every interval recorded fetched has all its samples stored.
        for i in fetchedIntervals {
            let samples = try await mock(days: 40).getRawStepSamples(for: interval(i.startMilliseconds, i.endMilliseconds))
            for s in samples { #expect(try store.sample(id: s.id) != nil) }
        }
        try store.close()
        store = try StepLogStore.open(dir.path)
        let rest = RecordingProvider(mock(days: 40))
        try await FetchService(provider: rest, store: store).fetchPending()
        // Only intervals not yet recorded fetched were asked for.
        #expect(!rest.rawQueries.contains { q in fetchedIntervals.contains { $0.startMilliseconds == q.0 } })
        #expect(store.counts.intervals[.pending] == 0)
    }
}
