// stepbench: the benchmarks behind tools/bench. Prints figures and ratios
// against a peer measured in the same run; never a pass/fail test.
import Foundation
import StepLog
import ToolSupport

let usage = """
    usage: stepbench engine [--n N[,N…]] [--dir DIR] [--no-peer] [--no-padding] [--no-pipeline] [--preallocation BYTES] [--peers ENGINE_PEERS] [--json]
           stepbench open DIR [--no-snapshots] [--repeat K] [--json]
           stepbench snapshots DIR [--json]
           stepbench compact [--n N] [--dir DIR] [--keep]
           stepbench export generate --out PATH.zip --size-mb N [--seed S] | import PATH.zip
           stepbench daily [--n N] [--dir DIR] [--repeat K] [--keep]
           stepbench --version
    """

func parseSizes(_ text: String) -> [Int] {
    text.split(separator: ",").compactMap { part -> Int? in
        let s = part.lowercased()
        if s.hasSuffix("m") { return Int(s.dropLast()).map { $0 * 1_000_000 } }
        if s.hasSuffix("k") { return Int(s.dropLast()).map { $0 * 1_000 } }
        return Int(s)
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == "--version" {
    print(ToolVersion.line("stepbench"))
    exit(0)
}
guard let command = arguments.first else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(2)
}
arguments.removeFirst()

do {
    switch command {
    case "engine":
        var bench = EngineBench()
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--n": i += 1; bench.sizes = parseSizes(arguments[i])
            case "--dir": i += 1; bench.directory = arguments[i]
            case "--no-peer": bench.runPeer = false
            case "--no-padding": bench.padding = false
            case "--no-pipeline": bench.pipelined = false
            case "--preallocation": i += 1; bench.preallocation = Int(arguments[i]) ?? bench.preallocation
            case "--peers": i += 1; bench.peersProgram = arguments[i]
            case "--json": bench.json = true
            case "--keep": bench.keep = true
            default: FileHandle.standardError.write(Data("stepbench engine: unknown option \(arguments[i])\n\(usage)\n".utf8)); exit(2)
            }
            i += 1
        }
        _ = try bench.run()
    case "open":
        guard let dir = arguments.first else { FileHandle.standardError.write(Data((usage + "\n").utf8)); exit(2) }
        var options = StoreOptions()
        options.readOnly = true
        options.useSnapshots = !arguments.contains("--no-snapshots")
        let repeats = arguments.firstIndex(of: "--repeat").map { Int(arguments[$0 + 1])! } ?? 1
        for _ in 0..<repeats {
            let cpuBefore = cpuSeconds()
            let (store, seconds) = try measure { try StepLogStore.open(dir, options: options) }
            let cpu = cpuSeconds()
            let figures = OpenFigures(seconds: seconds, samples: store.counts.samples, indexBytes: store.indexMemoryBytes,
                                      recordsReplayed: store.openReport.records,
                                      segmentsFromSnapshots: store.openReport.segmentsFromSnapshots,
                                      snapshotEntriesInParallel: store.openReport.snapshotEntriesInParallel,
                                      userSeconds: cpu.user - cpuBefore.user, systemSeconds: cpu.system - cpuBefore.system)
            try store.close()
            if arguments.contains("--json") {
                print(String(decoding: try JSONEncoder().encode(figures), as: UTF8.self))
            } else {
                print("open \(dir): \(fmt(seconds, 3)) s (CPU user \(fmt(figures.userSeconds)) s, system \(fmt(figures.systemSeconds)) s), \(figures.samples) samples, \(figures.recordsReplayed) records replayed, \(figures.segmentsFromSnapshots) segments from snapshots (\(figures.snapshotEntriesInParallel) entries on two threads), index \(mib(figures.indexBytes))")
            }
        }
    case "snapshots":
        guard let dir = arguments.first else { FileHandle.standardError.write(Data((usage + "\n").utf8)); exit(2) }
        try SnapshotBuildBench(directory: dir, json: arguments.contains("--json")).run()
    case "compact":
        var bench = CompactionBench()
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--n": i += 1; bench.n = parseSizes(arguments[i]).first ?? bench.n
            case "--dir": i += 1; bench.directory = arguments[i]
            case "--keep": bench.keep = true
            default: FileHandle.standardError.write(Data("stepbench compact: unknown option \(arguments[i])\n\(usage)\n".utf8)); exit(2)
            }
            i += 1
        }
        try bench.run()
    case "daily":
        var bench = DailyBench()
        var i = 0
        while i < arguments.count {
            switch arguments[i] {
            case "--n": i += 1; bench.n = parseSizes(arguments[i]).first ?? bench.n
            case "--dir": i += 1; bench.directory = arguments[i]
            case "--repeat": i += 1; bench.repeats = max(1, Int(arguments[i]) ?? bench.repeats)
            case "--keep": bench.keep = true
            default: FileHandle.standardError.write(Data("stepbench daily: unknown option \(arguments[i])\n\(usage)\n".utf8)); exit(2)
            }
            i += 1
        }
        try bench.run()
    case "export":
        do {
            try ExportBench.run(arguments: arguments)
        } catch let error as ExportBenchUsageError {
            FileHandle.standardError.write(Data("stepbench export: \(error)\n".utf8))
            exit(2)
        }
    default:
        FileHandle.standardError.write(Data("stepbench: unknown benchmark \(command)\n\(usage)\n".utf8))
        exit(2)
    }
} catch {
    FileHandle.standardError.write(Data("stepbench: \(error)\n".utf8))
    exit(1)
}
