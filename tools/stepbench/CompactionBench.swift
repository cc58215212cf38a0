import Foundation
import StepLog
#if canImport(Glibc)
import Glibc
#endif

/// `stepbench compact`: a store of N samples where every sample was changed
/// once and everything was then marked synced (over half the bytes dead),
/// then compacted: input MB/s, and peak memory during compaction beside the
/// index's own size (the target: index + 64 MiB).
struct CompactionBench {
    var n = 10_000_000
    var directory = "bench-data"
    var keep = false

    private func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

    func run() throws {
        let dir = directory + "/compact-\(n)"
        removeTree(dir)
        log("compaction bench, N = \(n): writing N samples, N changed versions, synced markers")
        do {
            let store = try StepLogStore.open(dir)
            for pass in 0..<2 {
                var source = BenchSampleSource(seed: 7)
                var progress = ProgressLine(pass == 0 ? "write" : "change", total: n)
                var batch: [StepSample] = []
                var done = 0
                while done < n {
                    batch.removeAll(keepingCapacity: true)
                    for i in done..<min(n, done + 1_000) {
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
        let (report, seconds) = try measure { try StepLogStore.compact(directory: dir) }
        let peak = residentMemory().peak
        let rate = Double(report.bytesRead) / seconds / 1e6
        let dead = Double(report.before.deadBytes) / Double(report.before.bytes)
        print("""
            compaction N=\(n): \(mib(Int(report.before.bytes))) in \(report.before.segments) segments (\(fmt(dead * 100, 0))% dead: \(fmt(Double(report.before.liveRecords) / Double(report.before.records) * 100, 0))% of records live) -> \(mib(Int(report.after.bytes))) in \(report.after.segments) segments
              \(fmt(seconds)) s, \(fmt(rate, 0)) MB/s of input read (open included)
              memory: peak RSS during compaction \(mib(peak - baseline)) above the process's \(mib(baseline)); index \(mib(indexBytes)); peak - index = \(mib(peak - baseline - indexBytes)) (target <= 64 MiB)
            """)
        if !keep { removeTree(dir) }
    }
}
