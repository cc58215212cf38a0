import Foundation
import StepLog
import StepSync

/// `stepbench daily`: `stepsync daily` on a store of N samples from three
/// overlapping sources (an Apple Watch, an iPhone and a third-party app, ten
/// years of days, written a day at a time in start order as ingest writes
/// them), timed as a user runs it: the whole command in a fresh
/// process (open, read every sample, merge, print the JSON document), median
/// and range of several runs. Beside it, in this process, where the time goes
/// (open, read, merge, JSON), `stepsync intervals` on the same store (which
/// has none), the cost of opening it alone, and `stepsync status` (open, the
/// counts, and the kinds of source from the counts by origin the index keeps:
/// no sample read).
struct DailyBench {
    var n = 3_000_000
    var directory = "bench-data"
    var repeats = 5
    var keep = false

    private func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

    static let days = 3_650
    static let endDay: Int64 = 20_778 // 2026-11-21
    static let sources = [(bundle: "Jane\u{2019}s Apple\u{00A0}Watch", device: "Apple Watch", share: 45),
                          (bundle: "Jane\u{2019}s iPhone", device: "iPhone", share: 40),
                          (bundle: "Pedometer++", device: "iPhone", share: 15)]

    /// One source's samples of one day: evenly spread over 06:00–23:00 UTC
    /// with jitter, 30 s–10 min, 10–500 steps; the three sources overlap.
    /// Labeled as an export's, as `stepsync ingest` labels them.
    static func samples(source j: Int, day: Int64, count: Int) -> [StepSample] {
        var rng = SplitMix64(seed: UInt64(bitPattern: day) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(j))
        let window: Int64 = 17 * 3_600_000
        let slot = window / Int64(max(1, count))
        let source = sources[j]
        return (0..<count).map { k in
            let start = day * 86_400_000 + 6 * 3_600_000 + Int64(k) * slot + Int64(rng.next(in: 0...Int(max(1, slot))))
            let duration = Int64(rng.next(in: 30...600)) * 1000
            return StepSample(id: DerivedUUID.make(100 + UInt64(j), UInt64(bitPattern: day), UInt64(k)),
                              startMilliseconds: start, endMilliseconds: start + duration, count: rng.next(in: 10...500),
                              sourceBundleId: source.bundle, sourceDeviceName: source.device, origin: .export)
        }
    }

    func run() throws {
        let dir = directory + "/daily-\(n)"
        if !FileManager.default.fileExists(atPath: dir) {
            log("daily bench: writing \(n) samples from 3 sources over \(Self.days) days")
            let store = try StepLogStore.open(dir)
            var progress = ProgressLine("write", total: n)
            var written = 0
            for d in 0..<Self.days {
                let day = Self.endDay - Int64(Self.days) + Int64(d)
                var batch: [StepSample] = []
                for j in 0..<Self.sources.count {
                    let share = n * Self.sources[j].share / 100
                    let count = share / Self.days + (d < share % Self.days ? 1 : 0)
                    batch += Self.samples(source: j, day: day, count: count)
                }
                // In start order, as ingest writes them (a source answers sorted by start).
                batch.sort { $0.startMilliseconds < $1.startMilliseconds }
                try store.upsert(batch, fetchedAt: Date())
                written += batch.count
                progress.update(written)
            }
            try store.sync()
            store.waitForSnapshots()
            try store.close()
        }
        let stepsync = Bundle.main.executableURL!.deletingLastPathComponent().appendingPathComponent("stepsync").path
        let arguments = ["daily", "--store", dir, "--tz", "Europe/Paris", "--by-source", "--json"]
        _ = try runQuietly(stepsync, arguments) // the files where the kernel keeps them, as in every run after the first
        var commandSeconds: [Double] = []
        var openSeconds: [Double] = []
        var statusSeconds: [Double] = []
        for _ in 0..<repeats {
            commandSeconds.append(try runQuietly(stepsync, arguments))
            openSeconds.append(try runQuietly(stepsync, ["intervals", "--store", dir]))
            statusSeconds.append(try runQuietly(stepsync, ["status", "--store", dir]))
        }
        // In this process: where the time goes (wall and CPU seconds).
        var cpu = cpuSeconds()
        func cpuSince() -> Double {
            let now = cpuSeconds()
            defer { cpu = now }
            return now.user + now.system - cpu.user - cpu.system
        }
        let (store, open) = try measure { try StepLogStore.open(dir, options: StoreOptions(readOnly: true)) }
        let openCPU = cpuSince()
        let (table, read) = try measure { try SampleTable(store: store) }
        let readCPU = cpuSince()
        try store.close()
        let calendar = LocalDayCalendar(identifier: "Europe/Paris")!
        let range = table.dayRange(in: calendar)!
        let sampleCount = table.count, sourceCount = table.sources.count
        _ = cpuSince()
        let (totals, merge) = measure { DailyMerge.totals(table, priority: .default, calendar: calendar, days: range) }
        let mergeCPU = cpuSince()
        let (json, write) = measure { totals.json(bySource: true) }
        let days = totals.days
        let merged = days.reduce(Int64(0)) { $0 + $1.merged }, raw = days.reduce(Int64(0)) { $0 + $1.raw }
        let median = commandSeconds.sorted()[repeats / 2], openMedian = openSeconds.sorted()[repeats / 2]
        let statusMedian = statusSeconds.sorted()[repeats / 2]
        print("""
            stepsync daily --tz Europe/Paris --by-source --json, \(sampleCount) samples from \(sourceCount) sources, \(totals.dayCount) days:
              \(fmt(median, 3)) s median of \(repeats) fresh processes (\(fmt(commandSeconds.min()!, 3))–\(fmt(commandSeconds.max()!, 3)) s), \(rate(sampleCount, median)) samples/s (asked for: <= 1 s)
              in process, wall (CPU): open \(fmt(open, 3)) s (\(fmt(openCPU, 3))), read samples \(fmt(read, 3)) s (\(fmt(readCPU, 3))), merge \(fmt(merge, 3)) s (\(fmt(mergeCPU, 3))), JSON \(fmt(write, 3)) s (\(json.count) bytes)
              peer: stepsync intervals on the same store (open alone) \(fmt(openMedian, 3)) s median (\(fmt(openSeconds.min()!, 3))–\(fmt(openSeconds.max()!, 3)) s)
              stepsync status on the same store \(fmt(statusMedian, 3)) s median (\(fmt(statusSeconds.min()!, 3))–\(fmt(statusSeconds.max()!, 3)) s), \(fmt(statusMedian / openMedian, 2))× the open alone
              merged \(merged) steps, raw \(raw) (the raw sum is \(fmt(Double(raw - merged) / Double(merged) * 100, 1))% over)
            """)
        if !keep { removeTree(dir) }
    }

    /// Wall-clock seconds of a child process with its output discarded.
    private func runQuietly(_ executable: String, _ arguments: [String]) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let (_, seconds) = try measure {
            try process.run()
            process.waitUntilExit()
        }
        guard process.terminationStatus == 0 else { throw BenchError("\(executable) \(arguments.joined(separator: " ")) exited with status \(process.terminationStatus)") }
        return seconds
    }
}
