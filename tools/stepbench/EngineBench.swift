import Foundation
import StepLog
#if canImport(Glibc)
import Glibc
private func Glibc_or_Darwin_sync() { Glibc.sync() }
#elseif canImport(Darwin)
import Darwin
private func Glibc_or_Darwin_sync() { Darwin.sync() }
#endif

/// `stepbench engine`: the storage engine's write, re-write, delete and open
/// figures, beside SQLite doing the same upserts in the same run.
struct EngineBench {
    var sizes: [Int] = [1_000_000, 10_000_000]
    var directory = "bench-data"
    var batchSize = 1_000
    var runPeer = true
    var json = false
    var keep = false
    /// `StoreOptions.padSyncsToSector` (`--no-padding` turns it off to measure its cost).
    var padding = true

    struct Result: Codable {
        var n: Int
        var upsertSeconds: Double
        var syncSeconds: Double
        var upsertPerSecond: Double
        var upsertMBPerSecond: Double
        var storeBytes: Int64
        var reupsertPerSecond: Double
        var deletePerSecond: Double
        var padding: Bool
        var openSeconds: Double
        var openWithSnapshotsSeconds: Double
        var openWithSnapshots: OpenFigures
        var openFullReplay: OpenFigures
        var indexBytesPerKey: Double
        var peerVersion: String?
        var peerUpsertPerSecond: Double?
        var ratioToPeer: Double?
    }

    func run() throws -> [Result] {
        var results: [Result] = []
        for n in sizes {
            results.append(try runOne(n))
        }
        if json {
            let data = try JSONEncoder().encode(results)
            print(String(decoding: data, as: UTF8.self))
        }
        return results
    }

    private func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

    private func runOne(_ n: Int) throws -> Result {
        let dir = directory + "/engine-\(n)"
        removeTree(dir)
        log("engine bench, N = \(n): upsert in batches of \(batchSize), one sync per batch")
        var source = BenchSampleSource(seed: 42)
        var changed: [StepSample] = []
        changed.reserveCapacity(n / 10)
        var options = StoreOptions()
        options.padSyncsToSector = padding
        let store = try StepLogStore.open(dir, options: options)
        var upsertSeconds = 0.0
        var syncSeconds = 0.0
        var progress = ProgressLine("upsert", total: n)
        var batch: [StepSample] = []
        batch.reserveCapacity(batchSize)
        var done = 0
        while done < n {
            batch.removeAll(keepingCapacity: true)
            for i in done..<min(n, done + batchSize) {
                let s = source.sample(i)
                batch.append(s)
                if i % 10 == 3 { var c = s; c.count += 1; changed.append(c) }
            }
            let (_, seconds) = try measure { try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: 1)) }
            let (_, synced) = try measure { try store.sync() }
            upsertSeconds += seconds + synced
            syncSeconds += synced
            done += batch.count
            progress.update(done)
        }
        let bytes = store.counts.bytes

        log("re-upsert of \(changed.count) changed samples (10%)")
        var reupsertSeconds = 0.0
        var from = 0
        while from < changed.count {
            let slice = changed[from..<min(changed.count, from + batchSize)]
            let (_, seconds) = try measure {
                try store.upsert(slice, fetchedAt: Date(timeIntervalSince1970: 2))
                try store.sync()
            }
            reupsertSeconds += seconds
            from += batchSize
        }
        try store.close()
        changed = []

        // Let the kernel finish writing back what the run wrote, so the open
        // figures measure opening, not writeback competing for both cores.
        // Each open runs in a fresh process (median of three), as a user's
        // would: in this one, the write phase's heap and page tables skew it.
        Glibc_or_Darwin_sync()
        log("open (index rebuild by full replay), fresh process, median of 3")
        let full = try OpenFigures.medianOfFreshProcesses(dir, snapshots: false)
        precondition(full.samples == n, "reopened store has \(full.samples) samples, expected \(n)")
        log("open with index snapshots, fresh process, median of 3")
        let withSnapshots = try OpenFigures.medianOfFreshProcesses(dir, snapshots: true)
        let openSeconds = full.seconds, snapshotSeconds = withSnapshots.seconds
        let bytesPerKey = Double(withSnapshots.indexBytes) / Double(withSnapshots.samples)

        // On a copy: the store itself stays as the upserts left it (tools/bench
        // keeps it for the snapshot-building bench).
        log("delete every sample in batches of \(batchSize), one sync per batch (on a copy of the store)")
        let deleteDir = dir + "-deletes"
        removeTree(deleteDir)
        try FileManager.default.copyItem(atPath: dir, toPath: deleteDir)
        Glibc_or_Darwin_sync()
        let deleteSeconds = try deleteAll(n, directory: deleteDir, options: options)
        removeTree(deleteDir)

        var peerRate: Double?
        var peerVersion: String?
        if runPeer, let peer = SQLitePeer() {
            peerVersion = peer.version
            log("peer: SQLite \(peer.version), same \(n) upserts")
            let path = directory + "/sqlite-\(n).db"
            for suffix in ["", "-wal", "-shm"] { removeTree(path + suffix) }
            try peer.open(path)
            var source = BenchSampleSource(seed: 42)
            var seconds = 0.0
            var done = 0
            var progress = ProgressLine("sqlite upsert", total: n)
            var rows: [(id: UUID, start: Int64, end: Int64, count: Int, bundle: String, device: String?)] = []
            while done < n {
                rows.removeAll(keepingCapacity: true)
                for i in done..<min(n, done + batchSize) {
                    let s = source.sample(i)
                    rows.append((s.id, s.startMilliseconds, s.endMilliseconds, s.count, s.sourceBundleId, s.sourceDeviceName))
                }
                let (_, t) = try measure { try peer.upsert(rows, fetchedAt: 1) }
                seconds += t
                done += rows.count
                progress.update(done)
            }
            peer.close()
            peerRate = Double(n) / seconds
            for suffix in ["", "-wal", "-shm"] { removeTree(path + suffix) }
        }

        let upsertRate = Double(n) / upsertSeconds
        let result = Result(
            n: n, upsertSeconds: upsertSeconds, syncSeconds: syncSeconds, upsertPerSecond: upsertRate,
            upsertMBPerSecond: Double(bytes) / upsertSeconds / 1e6, storeBytes: bytes,
            reupsertPerSecond: Double(n / 10) / reupsertSeconds, deletePerSecond: Double(n) / deleteSeconds, padding: padding,
            openSeconds: openSeconds,
            openWithSnapshotsSeconds: snapshotSeconds, openWithSnapshots: withSnapshots, openFullReplay: full,
            indexBytesPerKey: bytesPerKey,
            peerVersion: peerVersion, peerUpsertPerSecond: peerRate, ratioToPeer: peerRate.map { upsertRate / $0 })
        if !json {
            print("""
                engine N=\(n): upsert \(rate(n, upsertSeconds)) samples/s (\(fmt(result.upsertMBPerSecond, 1)) MB/s, \(fmt(upsertSeconds)) s of which sync \(fmt(syncSeconds)) s, store \(mib(Int(bytes))); sector padding \(padding ? "on" : "off"))
                  re-upsert 10% changed: \(fmt(result.reupsertPerSecond, 0)) samples/s
                  delete all, same batches: \(fmt(result.deletePerSecond, 0)) deletes/s
                  open (fresh process, median of 3): full replay \(fmt(openSeconds, 3)) s, with index snapshots \(fmt(snapshotSeconds, 3)) s
                    with snapshots: CPU user \(fmt(withSnapshots.userSeconds)) s + system \(fmt(withSnapshots.systemSeconds)) s (system: mostly the kernel zeroing the index's \(mib(withSnapshots.indexBytes)))
                  index: \(fmt(bytesPerKey, 1)) bytes/key
                  peer SQLite \(peerVersion ?? "-"): \(peerRate.map { fmt($0, 0) } ?? "not run") upserts/s; StepLog/SQLite = \(result.ratioToPeer.map { fmt($0, 1) + "x" } ?? "-")
                """)
        }
        if !keep { removeTree(dir) }
        return result
    }

    /// Deletes the `n` samples the upsert phase wrote (the same seeded ids), in
    /// batches of `batchSize` with a sync after each: seconds in delete and sync.
    private func deleteAll(_ n: Int, directory dir: String, options: StoreOptions) throws -> Double {
        let store = try StepLogStore.open(dir, options: options)
        var source = BenchSampleSource(seed: 42)
        var ids: [UUID] = []
        ids.reserveCapacity(batchSize)
        var seconds = 0.0
        var done = 0
        var progress = ProgressLine("delete", total: n)
        while done < n {
            ids.removeAll(keepingCapacity: true)
            for i in done..<min(n, done + batchSize) { ids.append(source.sample(i).id) }
            let (summary, t) = try measure { () throws -> DeleteSummary in
                let summary = try store.delete(ids, at: Date(timeIntervalSince1970: 3))
                try store.sync()
                return summary
            }
            precondition(summary.deleted == ids.count, "deleted \(summary.deleted) of \(ids.count)")
            seconds += t
            done += ids.count
            progress.update(done)
        }
        precondition(store.counts.pendingDeletions == n && store.counts.samples == 0)
        try store.close()
        return seconds
    }
}
