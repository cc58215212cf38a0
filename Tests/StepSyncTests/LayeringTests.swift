import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The seed 000 checklist, resumption, and the 10-year tiling.
@Suite struct LayeringTests {
    let now = Milliseconds.date(testEndDay * day + 12 * 3_600_000)

    func sample(_ n: Int, at ms: Int64, count: Int) -> StepSample {
        StepSample(id: DerivedUUID.make(99, UInt64(n)), startMilliseconds: ms, endMilliseconds: ms + 60_000, count: count,
                   sourceBundleId: "test", sourceDeviceName: nil)
    }

    @Test func noDataGivesOneEmptyIntervalOverTheWholeRange() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let range = interval(0, 10 * day)
        let summary = try await LayeringService(provider: FixedProvider(samples: [], range: range), store: store, now: { self.now }).performLayering()
        #expect(summary.intervalsRecorded == 1)
        let intervals = store.intervals()
        #expect(intervals.count == 1)
        #expect(intervals[0].stepCount == 0 && intervals[0].status == .empty)
        #expect(intervals[0].startMilliseconds == 0 && intervals[0].endMilliseconds == 10 * day)
    }

    @Test func fewerThanTenThousandStepsGiveOneInterval() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let samples = (0..<30).map { sample($0, at: 100 * day + Int64($0) * 3_600_000, count: 300) } // 9,000 steps
        try await LayeringService(provider: FixedProvider(samples: samples, range: interval(0, 400 * day)), store: store).performLayering()
        let intervals = store.intervals()
        #expect(intervals.count == 1)
        #expect(intervals[0].stepCount == 9_000 && intervals[0].status == .pending)
        #expect(intervals[0].startMilliseconds <= samples.first!.startMilliseconds)
        #expect(intervals[0].endMilliseconds > samples.last!.startMilliseconds)
    }

    @Test func moreStepsGiveSeveralIntervalsEachAtMostTenThousand() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let provider = mock(days: 120)
        try await LayeringService(provider: provider, store: store, now: { self.now }).performLayering()
        let intervals = store.intervals()
        #expect(intervals.count > 100)
        #expect(intervals.allSatisfy { $0.stepCount <= 10_000 })
        #expect(intervals.allSatisfy { $0.status == ($0.stepCount == 0 ? .empty : .pending) }) // nothing synced
        let ranges = store.layeringRanges
        #expect(ranges.count == 1)
        #expect(tiles(intervals, from: ranges[0].startMilliseconds, to: ranges[0].endMilliseconds))
        // The range holds all the data, found to within a day at each end.
        let all = try await provider.getRawStepSamples(for: interval(0, (testEndDay + 1) * day))
        let first = all.first!.startMilliseconds, last = all.last!.startMilliseconds
        #expect(ranges[0].startMilliseconds <= first && ranges[0].startMilliseconds > first - day)
        #expect(ranges[0].endMilliseconds > last && ranges[0].endMilliseconds <= last + day)
        #expect(intervals.reduce(0) { $0 + $1.stepCount } == provider.totalSteps)
    }

    @Test func clearRemovesEveryInterval() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let layering = LayeringService(provider: mock(days: 20), store: store, now: { self.now })
        try await layering.performLayering()
        #expect(!store.intervals().isEmpty)
        try layering.clearAllIntervals()
        #expect(store.intervals().isEmpty && store.layeringRanges.isEmpty)
        try store.close()
        #expect(try StepLogStore.open(dir.path).intervals().isEmpty)
    }

    @Test func tenYearsOfMockDataTileWithAtMostTenThousandStepsEach() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let provider = mock(days: 3_650)
        try await LayeringService(provider: provider, store: store, now: { self.now }).performLayering()
        let intervals = store.intervals()
        let range = try #require(store.layeringRanges.first)
        #expect(intervals.count > 3_000)
        #expect(intervals.allSatisfy { $0.stepCount <= 10_000 })
        #expect(tiles(intervals, from: range.startMilliseconds, to: range.endMilliseconds))
        #expect(intervals.reduce(0) { $0 + $1.stepCount } == provider.totalSteps)
    }

    @Test func aStoppedRunResumesWithoutAskingAboutRecordedSubtrees() async throws {
        let clean = TemporaryDirectory()
        let cleanStore = try StepLogStore.open(clean.path)
        let cleanProvider = RecordingProvider(mock(days: 200))
        try await LayeringService(provider: cleanProvider, store: cleanStore, now: { self.now }).performLayering()

        let dir = TemporaryDirectory()
        var store = try StepLogStore.open(dir.path)
        var asked = 0
        for stopAt in [40, 90, 150] {
            let stop = StopSignal()
            let provider = RecordingProvider(mock(days: 200))
            provider.stopAfterQueries = (stopAt, stop)
            let recordedBefore = store.intervals()
            await #expect(throws: StoppedByRequest.self) {
                try await LayeringService(provider: provider, store: store, stop: stop, now: { self.now }).performLayering()
            }
            // Nothing already recorded (a leaf, or anything inside one) was asked about again.
            for (a, b) in provider.aggregateQueries {
                let insideRecorded = recordedBefore.contains { leaf in leaf.startMilliseconds <= a && b <= leaf.endMilliseconds }
                #expect(!insideRecorded, "asked again about [\(a), \(b))")
            }
            asked += provider.aggregateQueries.count
            try store.close()
            store = try StepLogStore.open(dir.path) // as a new process would
        }
        let provider = RecordingProvider(mock(days: 200))
        let summary = try await LayeringService(provider: provider, store: store, now: { self.now }).performLayering()
        #expect(summary.intervalsKept > 0)
        asked += provider.aggregateQueries.count
        // Same leaves as a clean run, and no more questions than a clean run plus
        // the root searches repeated by runs stopped before the root was recorded.
        #expect(store.intervals() == cleanStore.intervals())
        #expect(asked <= cleanProvider.aggregateQueries.count + 30)
    }

    @Test func anotherSourceLayersAgainAndKeepsSamples() async throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        try await LayeringService(provider: mock(days: 20), store: store, now: { self.now }).performLayering()
        try await FetchService(provider: mock(days: 20), store: store).fetchPending()
        let samples = store.counts.samples
        #expect(samples > 0)
        let summary = try await LayeringService(provider: mock(days: 20, seed: 5), store: store, now: { self.now }).performLayering()
        #expect(summary.sourceChanged)
        #expect(store.counts.samples == samples)
        // Not vacuous: the new source's layering recorded intervals and a range.
        #expect(!store.intervals().isEmpty && !store.layeringRanges.isEmpty)
        #expect(store.intervals().allSatisfy { $0.status == .pending || $0.status == .empty })
        #expect(store.layeringRanges.allSatisfy { $0.sourceFingerprint == LayeringService.fingerprint(of: mock(days: 20, seed: 5)) })
    }
}
