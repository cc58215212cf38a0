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
            t.entries.map { "\($0.start) \($0.end) \($0.count) \(t.sources[Int($0.source)].label)" }
        }
        #expect(expected.sources.count == 100)
        for threads in [1, 2, 3, 8] {
            let table = try SampleTable(store: reopened, threads: threads)
            #expect(rows(table) == rows(expected), "\(threads) threads")
            #expect(Set(table.sources) == Set(expected.sources))
        }
    }
}
