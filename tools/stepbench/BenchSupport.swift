import Foundation
import StepLog
import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock seconds of `body`.
func measure<T>(_ body: () throws -> T) rethrows -> (T, Double) {
    let start = DispatchTime.now().uptimeNanoseconds
    let result = try body()
    return (result, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
}

/// Current and peak resident memory of this process in bytes (Linux /proc; 0 elsewhere).
func residentMemory() -> (current: Int, peak: Int) {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return (0, 0) }
    func field(_ name: String) -> Int {
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            let digits = line.split(separator: " ").compactMap { Int($0) }
            return (digits.first ?? 0) * 1024
        }
        return 0
    }
    return (field("VmRSS"), field("VmHWM"))
}

/// Resets the peak-RSS counter (Linux: write "5" to /proc/self/clear_refs).
func resetPeakMemory() {
    if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
        handle.write(Data("5".utf8))
        try? handle.close()
    }
}

func mib(_ bytes: Int) -> String { String(format: "%.1f MiB", Double(bytes) / 1_048_576) }
func rate(_ count: Int, _ seconds: Double) -> String { String(format: "%.0f", Double(count) / seconds) }
func fmt(_ value: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", value) }

/// Progress on stderr, at most every half second.
struct ProgressLine {
    let label: String
    let total: Int
    private var last = DispatchTime.now().uptimeNanoseconds
    private let start = DispatchTime.now().uptimeNanoseconds

    init(_ label: String, total: Int) {
        self.label = label
        self.total = total
    }

    mutating func update(_ done: Int) {
        let now = DispatchTime.now().uptimeNanoseconds
        guard now - last > 500_000_000 || done == total else { return }
        last = now
        let elapsed = Double(now - start) / 1e9
        let perSecond = Double(done) / max(elapsed, 1e-9)
        let eta = perSecond > 0 ? Double(total - done) / perSecond : 0
        FileHandle.standardError.write(Data(String(format: "  %@: %d/%d (%.0f/s, ETA %.0fs)\n", label, done, total, perSecond, eta).utf8))
    }
}

/// Deterministic benchmark samples: random v4 UUIDs from a seeded generator,
/// realistic field sizes (the ~90-byte records of a real store).
struct BenchSampleSource {
    private var random: SplitMix64

    init(seed: UInt64) { random = SplitMix64(seed: seed) }

    private mutating func next() -> UInt64 { random.next() }

    static let bundle = "com.apple.health"
    static let watch = "Apple Watch"

    mutating func sample(_ i: Int) -> StepSample {
        let high = (next() & ~0xF000) | 0x4000
        let low = (next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        let start = 1_500_000_000_000 + Int64(i) * 37_000
        return StepSample(id: UUIDBytes(high: high, low: low).uuid, startMilliseconds: start,
                          endMilliseconds: start + 30_000 + Int64(i % 270) * 1_000, count: 10 + i % 491,
                          sourceBundleId: Self.bundle, sourceDeviceName: i % 4 == 0 ? nil : Self.watch)
    }
}

func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

func directorySize(_ path: String) -> Int64 {
    let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    return names.reduce(0) { total, name in
        let attributes = try? FileManager.default.attributesOfItem(atPath: path + "/" + name)
        return total + ((attributes?[.size] as? NSNumber)?.int64Value ?? 0)
    }
}

/// A benchmark that could not measure what it set out to (a child process
/// failed, a peer is missing): the message says which.
struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// User and system CPU seconds this process has used so far.
func cpuSeconds() -> (user: Double, system: Double) {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return (seconds(usage.ru_utime), seconds(usage.ru_stime))
}
