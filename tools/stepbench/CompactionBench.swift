import Foundation
import StepLog
#if canImport(Glibc)
import Glibc
#endif

/// `stepbench compact`: a store of N samples where every sample was changed
/// once and everything was then marked synced (over half the bytes dead).
/// First compacted offline: input MB/s, and peak memory beside the index's
/// own size (the target: index + 64 MiB). Then every sample is changed and
/// marked synced again, and the store is used while it compacts in the
/// background: the latency of a 1,000-sample batch's upsert + sync,
/// p50/p99/max, without a compaction and during one, and their ratio (the
/// target: p99 during <= 2x without).
struct CompactionBench {
    var n = 10_000_000
    var directory = "bench-data"
    var keep = false

    private func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

    func run() throws {
        let dir = directory + "/compact-\(n)"
        removeTree(dir)
        log("compaction bench, N = \(n): writing N samples, N changed versions, synced markers")
        try makeDead(dir, passes: 0..<2)
        try offline(dir)
        log("changing every sample again, for the compaction in the background")
        try makeDead(dir, passes: 2..<3)
        try latencyDuringCompaction(dir)
        if !keep { removeTree(dir) }
    }

    /// A store that triggers nothing on its own: the bench starts compactions.
    var quiet: StoreOptions {
        var o = StoreOptions()
        o.compactionDeadBytes = 0
        return o
    }

    /// Writes every sample in each pass (the count changed), then marks everything synced.
    private func makeDead(_ dir: String, passes: Range<Int>) throws {
        do {
            let store = try StepLogStore.open(dir, options: quiet)
            for pass in passes {
                var source = BenchSampleSource(seed: 7)
                var progress = ProgressLine(pass == 0 ? "write" : "change", total: n)
                var batch: [StepSample] = []
                var done = 0
                while done < n {
                    batch.removeAll(keepingCapacity: true)
                    for i in done..<Swift.min(n, done + 1_000) {
                        var s = source.sample(i)
                        s.count += pass
                        batch.append(s)
                    }
                    try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: Double(pass)))
                    try store.sync()
                    done += batch.count
                    progress.update(done)
                }
            }
            var progress = ProgressLine("mark synced", total: n)
            var marked = 0
            while true {
                let batch = try store.unsyncedSamples(limit: 1_000)
                if batch.isEmpty { break }
                marked += try store.markSynced(batch)
                try store.sync()
                progress.update(marked)
            }
            store.waitForSnapshots()
            try store.close()
        }
        Glibc.sync()
    }

    /// Batches of 1,000 changed versions of stored samples, each upserted and
    /// synced, timed: first `baselineBatches` with no compaction, then for as
    /// long as a background compaction of the whole store runs. Changed
    /// versions, not new samples: the index keeps its size in both phases
    /// (new samples, written flat out for the whole compaction, grow the
    /// store several times over and cross index rehashes that the baseline
    /// never meets).
    private func latencyDuringCompaction(_ dir: String) throws {
        let store = try StepLogStore.open(dir, options: quiet)
        var source = BenchSampleSource(seed: 7)
        var next = 0
        func batch() throws -> Double {
            var samples: [StepSample] = []
            samples.reserveCapacity(1_000)
            for _ in 0..<1_000 {
                // The seeded source gives the stored ids in order: start again after n.
                if next % n == 0 { source = BenchSampleSource(seed: 7) }
                var s = source.sample(next % n)
                s.count += 3 + next / n
                samples.append(s)
                next += 1
            }
            let (_, seconds) = try measure {
                try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: 10))
                try store.sync()
            }
            return seconds
        }
        let baselineBatches = 1_000
        log("in use: \(baselineBatches) batches without compaction")
        var without: [Double] = []
        for _ in 0..<baselineBatches { without.append(try batch()) }
        log("in use: batches while compacting in the background")
        let bytesBefore = store.counts.bytes
        let started = DispatchTime.now().uptimeNanoseconds
        store.startBackgroundCompaction()
        var during: [Double] = []
        var compactionSeconds = 0.0
        while store.backgroundCompactions == 0 && store.backgroundCompactionError == nil {
            during.append(try batch())
        }
        compactionSeconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        if let error = store.backgroundCompactionError { throw error }
        let report = store.backgroundCompactionReport!
        let bytesAfter = store.counts.bytes
        try store.close()
        func ms(_ v: Double) -> String { fmt(v * 1000, 2) }
        let a = LatencyFigures(without), b = LatencyFigures(during)
        let compactedBatches = during.count
        print("""
            compaction in the background, N=\(n): \(mib(Int(bytesBefore))) -> \(mib(Int(bytesAfter))) in \(fmt(compactionSeconds)) s while a writer upserted and synced 1,000-sample batches (changed versions of stored samples)
              batch upsert+sync latency without compaction: p50 \(ms(a.p50)) ms, p99 \(ms(a.p99)) ms, max \(ms(a.max)) ms (\(without.count) batches)
              batch upsert+sync latency during compaction:  p50 \(ms(b.p50)) ms, p99 \(ms(b.p99)) ms, max \(ms(b.max)) ms (\(compactedBatches) batches)
              the switch held the store's mutex \(ms(report.switchSeconds)) ms; the copy read \(mib(Int(report.bytesRead))), \(fmt(Double(report.before.deadBytes) / Double(max(1, report.before.bytes)) * 100, 0))% dead
              p99 during / p99 without = \(fmt(b.p99 / a.p99)) (target <= 2)
            """)
    }

    struct LatencyFigures {
        var p50 = 0.0, p99 = 0.0, max = 0.0
        init(_ values: [Double]) {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return }
            p50 = sorted[sorted.count / 2]
            p99 = sorted[Swift.min(sorted.count - 1, Int(Double(sorted.count) * 0.99))]
            max = sorted.last!
        }
    }

    private func offline(_ dir: String) throws {
        // Opening alone (the first thing compaction does), measured on its own.
        var openBaseline = residentMemory().current
        resetPeakMemory()
        var indexBytes = 0
        do {
            let (store, openSeconds) = try measure { try StepLogStore.open(dir, options: StoreOptions(readOnly: true)) }
            indexBytes = store.indexMemoryBytes
            log("open: \(fmt(openSeconds, 3)) s, peak RSS \(mib(residentMemory().peak - openBaseline)) above baseline, index \(mib(indexBytes))")
        }
        openBaseline = 0
        let baseline = residentMemory().current
        resetPeakMemory()
        log("compacting")
        let (report, seconds) = try measure { try StepLogStore.compact(directory: dir, options: quiet) }
        let peak = residentMemory().peak
        let rate = Double(report.bytesRead) / seconds / 1e6
        let dead = Double(report.before.deadBytes) / Double(report.before.bytes)
        print("""
            compaction N=\(n): \(mib(Int(report.before.bytes))) in \(report.before.segments) segments (\(fmt(dead * 100, 0))% dead: \(fmt(Double(report.before.liveRecords) / Double(report.before.records) * 100, 0))% of records live) -> \(mib(Int(report.after.bytes))) in \(report.after.segments) segments
              \(fmt(seconds)) s, \(fmt(rate, 0)) MB/s of input read (open included)
              memory: peak RSS during compaction \(mib(peak - baseline)) above the process's \(mib(baseline)); index \(mib(indexBytes)); peak - index = \(mib(peak - baseline - indexBytes)) (target <= 64 MiB)
            """)
    }
}
