import Foundation

/// What tools/bench-peers/engine_peers prints for one engine (RocksDB,
/// LevelDB or LMDB doing stepbench engine's job: same keys, values, batches
/// and a sync per batch), and the table that sets them beside StepLog.
struct EnginePeerResult: Codable {
    var engine: String
    var version: String
    var n: Int
    var batch: Int
    var upsertPerSecond: Double
    var upsertSeconds: Double
    var reupsertPerSecond: Double
    var deletePerSecond: Double
    var openSeconds: Double
    /// Growth of the peer process's resident set over its upserts.
    var rssDeltaBytes: Int
    var bytesPerKey: Double
    var diskBytes: Int64

    static let engines = ["rocksdb", "leveldb", "lmdb"]

    /// Runs `program engine directory n --batch batch` (its progress on our
    /// stderr) and reads its JSON line; the peer's files are removed after.
    static func run(program: String, engine: String, n: Int, batch: Int, directory: String) throws -> EnginePeerResult {
        removeTree(directory)
        defer { removeTree(directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = [engine, directory, String(n), "--batch", String(batch)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("\(program) \(engine) exited with status \(process.terminationStatus)") }
        do {
            return try JSONDecoder().decode(EnginePeerResult.self, from: data)
        } catch {
            throw BenchError("\(program) \(engine) printed no figures: \(String(decoding: data, as: UTF8.self).prefix(200))")
        }
    }

    /// StepLog and the peers, one row each, and StepLog's ratio to each.
    static func table(stepLog: EngineBench.Result, peers: [EnginePeerResult]) -> String {
        func row(_ name: String, _ up: Double, _ re: Double, _ del: Double, _ open: Double, _ perKey: Double, _ keyKind: String, _ disk: Int64) -> String {
            name.padding(toLength: 22, withPad: " ", startingAt: 0)
                + String(format: "%12.0f %12.0f %12.0f %9.3f %8.1f %-10@ %10.1f", up, re, del, open, perKey, keyKind, Double(disk) / 1_048_576)
        }
        var lines = ["  same keys, values, batches of \(stepLog.n >= 1000 ? 1000 : stepLog.n), a sync per batch, N=\(stepLog.n):",
                     "  " + "engine".padding(toLength: 22, withPad: " ", startingAt: 0)
                        + String(format: "%12@ %12@ %12@ %9@ %8@ %-10@ %10@", "upserts/s", "re-upserts/s", "deletes/s", "open s", "B/key", "(of)", "disk MiB")]
        lines.append("  " + row("StepLog", stepLog.upsertPerSecond, stepLog.reupsertPerSecond, stepLog.deletePerSecond,
                                stepLog.openWithSnapshotsSeconds, stepLog.indexBytesPerKey, "index", stepLog.storeBytes))
        for p in peers {
            lines.append("  " + row("\(p.engine) \(p.version)", p.upsertPerSecond, p.reupsertPerSecond, p.deletePerSecond,
                                    p.openSeconds, p.bytesPerKey, "RSS delta", p.diskBytes))
        }
        let ratios = peers.map { p in
            "\(p.engine) \(fmt(stepLog.upsertPerSecond / p.upsertPerSecond, 1))x upserts, \(fmt(stepLog.reupsertPerSecond / p.reupsertPerSecond, 1))x re-upserts, \(fmt(stepLog.deletePerSecond / p.deletePerSecond, 1))x deletes"
        }
        lines.append("  StepLog/peer: " + ratios.joined(separator: "; "))
        return lines.joined(separator: "\n")
    }
}
