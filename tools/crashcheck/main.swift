// crashcheck [--workloads W,…] [--models ext4,strict] [--scale N] [--stride K]
//            [--inject [--inject-stride K]] [--json]
//
// The large run of the crash-consistency checker (issue #15 and #19): for
// each workload, records every mutating file operation through the StepLog
// I/O seam, builds the disk states a power loss may leave under each model
// after every operation (bounded variants per crash point, deduplicated),
// and checks each: the store opens without help, holds every acknowledged
// sample state and layering range, verifies, and takes the next run's writes.
// With --inject, also fails the Nth mutating operation of each workload for
// every N (EIO and ENOSPC, once and persistent), re-runs it without the
// fault, and checks the power-loss states after. Results on stdout (a line
// per workload and model, or --json); progress on stderr. Exit 1 when
// anything failed, 2 on a usage error.
import Foundation
import StepLog
import StepTestSupport
import ToolSupport

let usageText = "usage: crashcheck [--workloads \(CrashWorkload.Kind.allCases.map(\.rawValue).joined(separator: ","))] [--models ext4,strict] [--scale N] [--stride K] [--inject [--inject-stride K]] [--json]\n"

func usage(_ message: String) -> Never {
    FileHandle.standardError.write(Data("crashcheck: \(message)\n\(usageText)".utf8))
    exit(2)
}

var kinds = CrashWorkload.Kind.allCases
var models = CrashModel.allCases
var scale = 3
var stride = 1
var inject = false
var injectStride = 1
var json = false
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let option = arguments.removeFirst()
    func value() -> String {
        guard !arguments.isEmpty else { usage("\(option) needs a value") }
        return arguments.removeFirst()
    }
    switch option {
    case "--workloads":
        kinds = value().split(separator: ",").map { name in
            guard let kind = CrashWorkload.Kind(rawValue: String(name)) else { usage("unknown workload '\(name)'") }
            return kind
        }
    case "--models":
        models = value().split(separator: ",").map { name in
            guard let model = CrashModel(rawValue: String(name)) else { usage("unknown model '\(name)'") }
            return model
        }
    case "--scale": guard let n = Int(value()), n > 0 else { usage("--scale takes a positive number") }; scale = n
    case "--stride": guard let n = Int(value()), n > 0 else { usage("--stride takes a positive number") }; stride = n
    case "--inject": inject = true
    case "--inject-stride": guard let n = Int(value()), n > 0 else { usage("--inject-stride takes a positive number") }; injectStride = n
    case "--json": json = true
    case "-h", "--help":
        print(usageText, terminator: "")
        exit(0)
    case "--version":
        print(ToolVersion.line("crashcheck"))
        exit(0)
    default: usage("unknown option '\(option)'")
    }
}

func progress(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
/// Results, a line at a time (unbuffered: a long run shows them as they come).
func emit(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let scratch = CrashHarness.scratch("crashcheck")
/// Exits after removing the scratch directory (exit skips deinit).
@MainActor func finish(_ code: Int32) -> Never {
    try? FileManager.default.removeItem(atPath: scratch.path)
    exit(code)
}
var failed = false
var rows: [[String: Any]] = []
for kind in kinds {
    let workload = CrashWorkload(kind, scale: scale)
    let dir = scratch.sub("\(kind.rawValue)-store")
    let recorded: (IORecorder, ExpectationLog)
    do { recorded = try CrashHarness.record(workload, directory: dir) } catch {
        progress("crashcheck: \(kind.rawValue): the workload itself failed: \(error)")
        finish(1)
    }
    progress("\(kind.rawValue): \(recorded.0.operationCount) operations recorded")
    for model in models {
        var checker = CrashChecker(workload: workload, model: model)
        checker.stride = stride
        let started = Date()
        let report = checker.check(recorded.0, log: recorded.1, scratch: scratch.sub("\(kind.rawValue)-\(model.rawValue)"))
        let seconds = Date().timeIntervalSince(started)
        if report.failures > 0 { failed = true }
        if json {
            rows.append(["check": "power-loss", "workload": kind.rawValue, "model": model.rawValue, "operations": recorded.0.operationCount,
                         "crashPoints": report.crashPoints, "statesBuilt": report.statesBuilt, "distinctStates": report.distinctStates,
                         "statesChecked": report.statesChecked, "failures": report.failures, "examples": report.examples, "seconds": seconds])
        } else {
            emit("power loss  \(report) (\(recorded.0.operationCount) ops, \(String(format: "%.1f", seconds)) s)")
            for e in report.examples { emit("  \(e)") }
        }
    }
    guard inject else { continue }
    let operations: Int
    do { operations = try CrashHarness.operationCount(workload, scratch: scratch.path) } catch {
        progress("crashcheck: \(kind.rawValue): counting operations failed: \(error)")
        finish(1)
    }
    let faults = CrashHarness.faults(operations: operations, stride: injectStride)
    for model in models {
        let started = Date()
        let report = CrashHarness.inject(workload, faults: faults, model: model, scratch: scratch.sub("inject-\(kind.rawValue)")) { k in
            if k % 100 == 0 { progress("\(kind.rawValue) \(model.rawValue): fault \(k + 1) of \(faults.count)") }
        }
        let seconds = Date().timeIntervalSince(started)
        if report.rerunsFailed + report.badDiskFullMessages + report.failedStates > 0 { failed = true }
        if json {
            rows.append(["check": "error-injection", "workload": kind.rawValue, "model": model.rawValue, "operations": operations,
                         "runs": report.runs, "failedRuns": report.failedRuns, "rerunsFailed": report.rerunsFailed,
                         "badDiskFullMessages": report.badDiskFullMessages, "statesChecked": report.statesChecked,
                         "failedStates": report.failedStates, "examples": report.examples, "seconds": seconds])
        } else {
            emit("injection   \(report) (\(operations) ops × EIO/ENOSPC × once/persistent, \(String(format: "%.1f", seconds)) s)")
            for e in report.examples { emit("  \(e)") }
        }
    }
}
if json {
    let data = try! JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys])
    emit(String(decoding: data, as: UTF8.self))
}
finish(failed ? 1 : 0)
