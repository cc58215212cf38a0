import Foundation
import Testing
@testable import StepLog

/// `forEachSampleSpan` sees exactly what `forEachSample` sees, in the same order.
@Suite struct SampleSpanTests {
    struct Seen: Equatable {
        var start: Int64
        var end: Int64
        var count: Int64 // thousandths
        var bundle: [UInt8]
        var device: [UInt8]?
    }

    func spans(_ store: StepLogStore) throws -> [Seen] {
        var seen: [Seen] = []
        try store.forEachSampleSpan { s in
            seen.append(Seen(start: s.startMilliseconds, end: s.endMilliseconds, count: Int64(s.countThousandths),
                             bundle: Array(s.sourceBundleId), device: s.sourceDeviceName.map { Array($0) }))
        }
        return seen
    }

    func samples(_ store: StepLogStore) throws -> [Seen] {
        var seen: [Seen] = []
        try store.forEachSample { s in
            let x = s.sample
            seen.append(Seen(start: x.startMilliseconds, end: x.endMilliseconds, count: x.countThousandths,
                             bundle: Array(x.sourceBundleId.utf8), device: x.sourceDeviceName.map { Array($0.utf8) }))
        }
        return seen
    }

    @Test func currentVersionsOnlyAcrossSegmentsAndPendingWrites() throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        options.segmentSize = 64 << 10 // many segments
        let store = try StepLogStore.open(dir.path, options: options)
        var rng = SplitMix64(seed: 21)
        for round in 0..<40 {
            var batch: [StepSample] = []
            for _ in 0..<100 {
                let n = UInt64(rng.next(in: 0...2_000)) // often a sample written before: a newer version
                let device: String? = rng.next(in: 0...3) == 0 ? nil : (rng.next(in: 0...9) == 0 ? String(repeating: "Ä", count: 700) : "iPhone")
                var sample = makeSample(n, count: round * 10 + rng.next(in: 0...9), bundle: rng.next(in: 0...1) == 0 ? "Jane’s Apple\u{00A0}Watch" : "",
                                        device: device)
                if rng.next(in: 0...3) == 0 { sample.countThousandths += Int64(rng.next(in: 1...999)) } // a fraction (format 3)
                batch.append(sample)
            }
            try store.upsert(batch, fetchedAt: Date())
            if round % 3 == 0 { try store.sync() } // and some left pending in the writer
        }
        let expected = try samples(store)
        #expect(expected.count == store.counts.samples && expected.count > 1_000)
        #expect(try spans(store) == expected)
        #expect(expected.contains { $0.device?.count == 1_400 }, "a payload longer than the queue's first slots")
        try store.close()
        let reopened = try StepLogStore.open(dir.path, options: StoreOptions(readOnly: true))
        #expect(try spans(reopened) == expected)
    }

    /// `forEachSampleRecordSpan` gives every sample record, in log order,
    /// and counts them beside the live samples: equal (and then the same
    /// spans as `forEachSampleSpan`) while no sample was written twice or
    /// deleted, across segments, pending writes and runs on several threads.
    @Test func everyRecordCountedBesideTheLiveSamples() throws {
        let dir = TemporaryDirectory()
        var options = StoreOptions()
        options.segmentSize = 64 << 10
        let store = try StepLogStore.open(dir.path, options: options)
        for round in 0..<20 {
            let batch = (0..<100).map { k in
                makeSample(UInt64(round * 100 + k), count: k, bundle: "Jane’s iPhone", device: k % 4 == 0 ? nil : String(repeating: "Ä", count: k * 7))
            }
            try store.upsert(batch, fetchedAt: Date())
            if round % 3 == 0 { try store.sync() }
        }
        func records(parts: Int) throws -> (seen: [Seen], records: Int, live: Int) {
            let lock = NSLock()
            nonisolated(unsafe) var byRun: [Int: [Seen]] = [:]
            let read = try store.forEachSampleRecordSpan(parts: parts) { run, s in
                let seen = Seen(start: s.startMilliseconds, end: s.endMilliseconds, count: Int64(s.countThousandths),
                                bundle: Array(s.sourceBundleId), device: s.sourceDeviceName.map { Array($0) })
                lock.lock()
                byRun[run, default: []].append(seen)
                lock.unlock()
            }
            return (byRun.keys.sorted().flatMap { byRun[$0]! }, read.records, read.liveSamples)
        }
        let expected = try spans(store)
        for parts in [1, 3] {
            let read = try records(parts: parts)
            #expect(read.records == 2_000 && read.live == 2_000, "\(parts) runs")
            #expect(read.seen == expected, "\(parts) runs")
        }
        try store.upsert([makeSample(5, count: 99, bundle: "Jane’s iPhone", device: nil)], fetchedAt: Date())
        let rewritten = try records(parts: 3)
        #expect(rewritten.records == 2_001 && rewritten.live == 2_000)
        #expect(rewritten.seen.count == 2_001)
        try store.close()
    }
}
