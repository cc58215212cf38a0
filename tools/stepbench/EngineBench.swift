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
    /// Batch k+1 written while batch k syncs (`syncInBackground`, each batch
    /// acknowledged after its own sync); `--no-pipeline`: upsert, then `sync()`.
    var pipelined = true
    /// `StoreOptions.preallocationSize` (`--preallocation BYTES`; 0 turns it off).
    var preallocation = StoreOptions().preallocationSize
    /// The compiled tools/bench-peers/engine_peers (RocksDB, LevelDB, LMDB), run beside StepLog.
    var peersProgram: String?

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
        var pipelined: Bool
        /// dd writing the store's bytes in batch-sized writes, each synced (oflag=dsync).
        var ddBatchBytes: Int
        var ddSeconds: Double
        var ddMBPerSecond: Double
        var ratioToDD: Double
        var openSeconds: Double
        var openWithSnapshotsSeconds: Double
        var openWithSnapshots: OpenFigures
        var openFullReplay: OpenFigures
        var indexBytesPerKey: Double
        var peerVersion: String?
        var peerUpsertPerSecond: Double?
        var ratioToPeer: Double?
        var enginePeers: [EnginePeerResult]
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
        options.preallocationSize = preallocation
        // The delete phase leaves the store mostly dead: a background compaction
        // would start mid-measurement and change the deletes/s and disk figures
        // (compaction has its own section).
        options.compactionDeadBytes = 0
        let store = try StepLogStore.open(dir, options: options)
        var writer = BatchWriter(store: store, pipelined: pipelined)
        var progress = ProgressLine("upsert", total: n)
        var samples: [StepSample] = []
        samples.reserveCapacity(Self.chunk)
        var done = 0
        while done < n {
            // Samples are made ahead, untimed, a chunk of batches at a time.
            samples.removeAll(keepingCapacity: true)
            for i in done..<min(n, done + Self.chunk) {
                let s = source.sample(i)
                samples.append(s)
                if i % 10 == 3 { var c = s; c.count += 1; changed.append(c) }
            }
            var from = 0
            while from < samples.count {
                let batch = samples[from..<min(samples.count, from + batchSize)]
                _ = try writer.write { try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: 1)) }
                from += batch.count
                progress.update(done + from)
            }
            done += samples.count
        }
        try writer.finish()
        samples = []
        let upsertSeconds = writer.seconds, syncSeconds = writer.syncSeconds
        let bytes = store.counts.bytes

        // The disk's pace in this run: dd writing as many bytes, a batch's worth a write, each synced.
        let batches = (n + batchSize - 1) / batchSize
        let ddBatchBytes = Int(bytes) / batches
        log("dd: \(batches) writes of \(ddBatchBytes) bytes, oflag=dsync (the same bytes as the store)")
        let ddSeconds = try Self.ddSeconds(directory: directory, blockSize: ddBatchBytes, count: batches)

        log("re-upsert of \(changed.count) changed samples (10%)")
        var rewriter = BatchWriter(store: store, pipelined: pipelined)
        var from = 0
        while from < changed.count {
            let slice = changed[from..<min(changed.count, from + batchSize)]
            _ = try rewriter.write { try store.upsert(slice, fetchedAt: Date(timeIntervalSince1970: 2)) }
            from += batchSize
        }
        try rewriter.finish()
        let reupsertSeconds = rewriter.seconds
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
        var sqlite: EnginePeerResult?
        if runPeer, let peer = SQLitePeer() {
            peerVersion = peer.version
            log("peer: SQLite \(peer.version), same \(n) upserts, re-upserts, open, deletes")
            let path = directory + "/sqlite-\(n).db"
            let files = ["", "-wal", "-shm"].map { path + $0 }
            files.forEach(removeTree)
            typealias Row = (id: UUID, start: Int64, end: Int64, count: Int, bundle: String, device: String?)
            // One pass over the seeded samples in batches: `rows` makes a batch's rows from sample i.
            func pass(_ label: String, _ body: ([StepSample]) throws -> Void, where keep: (Int) -> Bool = { _ in true }) throws -> Double {
                var source = BenchSampleSource(seed: 42)
                var seconds = 0.0, done = 0, written = 0
                var progress = ProgressLine(label, total: n)
                var batch: [StepSample] = []
                while done < n {
                    batch.removeAll(keepingCapacity: true)
                    while done < n && batch.count < batchSize {
                        let s = source.sample(done)
                        if keep(done) { batch.append(s) }
                        done += 1
                    }
                    if batch.isEmpty { continue }
                    let (_, t) = try measure { try body(batch) }
                    seconds += t
                    written += batch.count
                    progress.update(done)
                }
                return Double(written) / seconds
            }
            func rows(_ batch: [StepSample], delta: Int) -> [Row] {
                batch.map { ($0.id, $0.startMilliseconds, $0.endMilliseconds, $0.count + delta, $0.sourceBundleId, $0.sourceDeviceName) }
            }
            let rssBefore = residentMemory().current
            try peer.open(path)
            let upserts = try pass("sqlite upsert", { try peer.upsert(rows($0, delta: 0), fetchedAt: 1) })
            let rssDelta = residentMemory().current - rssBefore
            let disk = files.reduce(Int64(0)) { total, file in
                total + (((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.int64Value ?? 0)
            }
            let reupserts = try pass("sqlite re-upsert", { try peer.upsert(rows($0, delta: 1), fetchedAt: 2) }, where: { $0 % 10 == 3 })
            peer.close()
            let (_, openSeconds) = try measure { try peer.open(path) }
            let deletes = try pass("sqlite delete", { try peer.delete($0.map(\.id)) })
            peer.close()
            peerRate = upserts
            sqlite = EnginePeerResult(engine: "sqlite", version: peer.version, n: n, batch: batchSize, upsertPerSecond: upserts,
                                      upsertSeconds: Double(n) / upserts, reupsertPerSecond: reupserts, deletePerSecond: deletes,
                                      openSeconds: openSeconds, rssDeltaBytes: rssDelta, bytesPerKey: Double(rssDelta) / Double(n),
                                      diskBytes: disk)
            files.forEach(removeTree)
        }

        var enginePeers: [EnginePeerResult] = sqlite.map { [$0] } ?? []
        if let peersProgram {
            for engine in EnginePeerResult.engines {
                log("peer: \(engine), same \(n) upserts, re-upserts, open, deletes")
                enginePeers.append(try EnginePeerResult.run(program: peersProgram, engine: engine, n: n, batch: batchSize,
                                                            directory: directory + "/\(engine)-\(n)"))
            }
        }

        let upsertRate = Double(n) / upsertSeconds
        let ddRate = Double(n) / ddSeconds
        let result = Result(
            n: n, upsertSeconds: upsertSeconds, syncSeconds: syncSeconds, upsertPerSecond: upsertRate,
            upsertMBPerSecond: Double(bytes) / upsertSeconds / 1e6, storeBytes: bytes,
            reupsertPerSecond: Double(n / 10) / reupsertSeconds, deletePerSecond: Double(n) / deleteSeconds, padding: padding,
            pipelined: pipelined, ddBatchBytes: ddBatchBytes, ddSeconds: ddSeconds,
            ddMBPerSecond: Double(ddBatchBytes * batches) / ddSeconds / 1e6, ratioToDD: upsertRate / ddRate,
            openSeconds: openSeconds,
            openWithSnapshotsSeconds: snapshotSeconds, openWithSnapshots: withSnapshots, openFullReplay: full,
            indexBytesPerKey: bytesPerKey,
            peerVersion: peerVersion, peerUpsertPerSecond: peerRate, ratioToPeer: peerRate.map { upsertRate / $0 },
            enginePeers: enginePeers)
        if !json {
            print("""
                engine N=\(n): upsert \(rate(n, upsertSeconds)) samples/s (\(fmt(result.upsertMBPerSecond, 1)) MB/s, \(fmt(upsertSeconds)) s, \(pipelined ? "waiting for syncs" : "of which sync") \(fmt(syncSeconds)) s, store \(mib(Int(bytes))); \(pipelined ? "pipelined: batch k+1 written while batch k syncs" : "upsert then sync"); sector padding \(padding ? "on" : "off"))
                  dd, same bytes in \(batches) writes of \(ddBatchBytes) bytes, oflag=dsync: \(fmt(ddSeconds)) s = \(fmt(result.ddMBPerSecond, 1)) MB/s = \(fmt(ddRate, 0)) samples/s; StepLog/dd = \(fmt(result.ratioToDD, 2))
                  re-upsert 10% changed: \(fmt(result.reupsertPerSecond, 0)) samples/s
                  delete all, same batches: \(fmt(result.deletePerSecond, 0)) deletes/s
                  open (fresh process, median of 3): full replay \(fmt(openSeconds, 3)) s, with index snapshots \(fmt(snapshotSeconds, 3)) s
                    with snapshots: \(withSnapshots.snapshotEntriesInParallel) entries applied on two threads; CPU user \(fmt(withSnapshots.userSeconds)) s + system \(fmt(withSnapshots.systemSeconds)) s (system: mostly the kernel zeroing the index's \(mib(withSnapshots.indexBytes)))
                  index: \(fmt(bytesPerKey, 1)) bytes/key
                  peer SQLite \(peerVersion ?? "-"): \(peerRate.map { fmt($0, 0) } ?? "not run") upserts/s; StepLog/SQLite = \(result.ratioToPeer.map { fmt($0, 1) + "x" } ?? "-")
                """)
            if !enginePeers.isEmpty {
                print(EnginePeerResult.table(stepLog: result, peers: enginePeers))
            }
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
        var writer = BatchWriter(store: store, pipelined: pipelined)
        var done = 0
        var progress = ProgressLine("delete", total: n)
        while done < n {
            ids.removeAll(keepingCapacity: true)
            for i in done..<min(n, done + batchSize) { ids.append(source.sample(i).id) }
            let summary = try writer.write { try store.delete(ids, at: Date(timeIntervalSince1970: 3)) }
            precondition(summary.deleted == ids.count, "deleted \(summary.deleted) of \(ids.count)")
            done += ids.count
            progress.update(done)
        }
        try writer.finish()
        let seconds = writer.seconds
        precondition(store.counts.pendingDeletions == n && store.counts.samples == 0)
        try store.close()
        return seconds
    }
}

extension EngineBench {
    /// Samples made ahead of the timed loop at a time (100 batches of 1,000).
    static let chunk = 100_000

    /// Seconds dd takes to write `count` blocks of `blockSize` bytes to a new
    /// file in `directory`, each write synced (`oflag=dsync`).
    static func ddSeconds(directory: String, blockSize: Int, count: Int) throws -> Double {
        let path = directory + "/dd-\(getpid()).bin"
        removeTree(path)
        defer { removeTree(path) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/dd")
        process.arguments = ["if=/dev/zero", "of=\(path)", "bs=\(blockSize)", "count=\(count)", "oflag=dsync"]
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let (_, seconds) = try measure { () throws -> Void in
            try process.run()
            process.waitUntilExit()
        }
        guard process.terminationStatus == 0 else { throw BenchError("dd exited with status \(process.terminationStatus)") }
        return seconds
    }
}
