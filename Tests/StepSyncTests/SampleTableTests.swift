import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// A table read from a store (spans, runs of segments on several threads)
/// holds what one built from the store's samples holds.
@Suite struct SampleTableTests {
    @Test func readingAStoreInRunsGivesTheSamplesInLogOrder() throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        options.segmentSize = 256 << 10 // a dozen segments
        let store = try StepLogStore.open(dir.path, options: options)
        var rng = SplitMix64(seed: 40)
        for batch in 0..<30 {
            // 100 sources (past the 64 compared in place), some samples written again with new content.
            let samples = (0..<500).map { k -> StepSample in
                let n = UInt64(rng.next(in: 0...9_000))
                let source = rng.next(in: 0...99)
                let start = 1_780_000_000_000 + Int64(n) * 60_000
                return StepSample(id: DerivedUUID.make(41, n), startMilliseconds: start, endMilliseconds: start + Int64(rng.next(in: 0...600_000)),
                                  count: batch * 1_000 + k, sourceBundleId: "app \(source)", sourceDeviceName: source % 3 == 0 ? nil : "device \(source % 7)")
            }
            try store.upsert(samples, fetchedAt: Date())
        }
        try store.close()
        let reopened = try StepLogStore.open(dir.path, options: StoreOptions(readOnly: true))
        var samples: [StepSample] = []
        try reopened.forEachSample { samples.append($0.sample) }
        let expected = SampleTable(samples)
        func rows(_ t: SampleTable) -> [String] {
            t.entries.map { "\($0.start) \($0.end) \($0.countThousandths) \(t.sources[Int($0.source)].label)" }
        }
        #expect(expected.sources.count == 100)
        for threads in [1, 2, 3, 8] {
            let table = try SampleTable(store: reopened, threads: threads)
            #expect(rows(table) == rows(expected), "\(threads) threads")
            #expect(Set(table.sources) == Set(expected.sources))
        }
    }

    /// The unchecked read (every sample record, no index lookups) is used only
    /// when it read exactly the live samples; a rewritten sample and a pending
    /// deletion each make it fall back to the current versions, and the table
    /// is always the store's live samples.
    @Test func theUncheckedReadIsUsedOnlyWhenEveryRecordIsLive() throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        options.segmentSize = 64 << 10
        let store = try StepLogStore.open(dir.path, options: options)
        func sample(_ n: UInt64, count: Int) -> StepSample {
            let start = 1_780_000_000_000 + Int64(n) * 60_000
            return StepSample(id: DerivedUUID.make(43, n), startMilliseconds: start, endMilliseconds: start + 30_000, count: count,
                              sourceBundleId: "app \(n % 3)", sourceDeviceName: n % 2 == 0 ? nil : "iPhone")
        }
        try store.upsert((0..<3_000).map { sample($0, count: Int($0 % 500)) }, fetchedAt: Date())
        func check(_ what: String, uncheckedMatches: Bool) throws {
            let read = try store.forEachSampleRecordSpan(parts: 3) { _, _ in }
            #expect((read.records == read.liveSamples) == uncheckedMatches, "\(what): \(read)")
            #expect(read.liveSamples == store.counts.samples, "\(what)")
            var samples: [StepSample] = []
            try store.forEachSample { samples.append($0.sample) }
            let expected = SampleTable(samples)
            for threads in [1, 3] {
                let table = try SampleTable(store: store, threads: threads)
                #expect(table.entries.map { "\($0.start) \($0.countThousandths) \(table.sources[Int($0.source)].label)" }
                        == expected.entries.map { "\($0.start) \($0.countThousandths) \(expected.sources[Int($0.source)].label)" }, "\(what), \(threads) threads")
            }
        }
        try check("written once", uncheckedMatches: true)
        try store.upsert([sample(7, count: 9_999)], fetchedAt: Date())
        try check("a sample rewritten", uncheckedMatches: false)
        let fresh = TemporaryDirectory()
        let other = try StepLogStore.open(fresh.path, options: options)
        try other.upsert((0..<500).map { sample($0, count: 1) }, fetchedAt: Date())
        _ = try other.delete([DerivedUUID.make(43, 11)], at: Date())
        let read = try other.forEachSampleRecordSpan(parts: 2) { _, _ in }
        #expect(read.records == 500 && read.liveSamples == 499)
        #expect(try SampleTable(store: other).count == 499)
        try other.close()
        try store.close()
    }

    /// Times no real sample has (a damaged record) are clamped, never a trap:
    /// a sample over ±2^62 ms still spreads over the days asked for.
    @Test func absurdTimesAreClampedNotATrap() {
        let huge = StepSample(id: DerivedUUID.make(42, 1), startMilliseconds: -(1 << 62), endMilliseconds: 1 << 62, count: Int(UInt32.max),
                              sourceBundleId: "x", sourceDeviceName: nil)
        let normal = StepSample(id: DerivedUUID.make(42, 2), startMilliseconds: 1_780_000_000_000, endMilliseconds: 1_780_000_600_000,
                                count: 100, sourceBundleId: "Jane\u{2019}s iPhone", sourceDeviceName: "iPhone")
        let table = SampleTable([huge, normal])
        #expect(table.entries[0].start == -(1 << 60) && table.entries[0].end == 1 << 60)
        let calendar = LocalDayCalendar(identifier: "UTC")!
        let day = calendar.localDay(ofMilliseconds: 1_780_000_000_000)
        let totals = DailyMerge.totals(table, priority: .default, calendar: calendar, days: (day - 1)...(day + 1))
        for d in totals.days { #expect(d.merged <= d.raw) }
        // 4,294,967,295 steps over 2^61 ms are a fraction of a step a day: the iPhone's 100 are what counts.
        #expect(totals.day(1).raw >= 100 && totals.day(1).raw <= 101)
    }
}
