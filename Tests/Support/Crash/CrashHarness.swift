import Foundation
import StepLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Runs workloads under an `IORecorder`: plain recordings for the power-loss
/// checker, and error injection (the Nth mutating operation fails with EIO or
/// ENOSPC, once or from then on; then the fault is cleared — space freed —
/// the workload is run again to its end, and a power loss is simulated).
public enum CrashHarness {
    /// Prepares `workload` in `directory` and records its run.
    public static func record(_ workload: CrashWorkload, directory: String) throws -> (IORecorder, ExpectationLog) {
        let log = ExpectationLog()
        try workload.prepare(directory, log: log)
        let recorder = IORecorder(root: directory, acknowledged: log.lastMark)
        recorder.install()
        defer { recorder.uninstall() }
        try workload.run(directory, log: log) { recorder.acknowledge($0) }
        return (recorder, log)
    }

    public struct InjectionReport: Sendable, CustomStringConvertible {
        public var workload: String
        public var model: CrashModel
        public var runs = 0
        /// Runs where the injected fault made the workload throw.
        public var failedRuns = 0
        /// Re-runs (fault cleared) that did not complete: should be 0.
        public var rerunsFailed = 0
        /// ENOSPC errors not rendered as one "disk full: … <path> …" line: should be 0.
        public var badDiskFullMessages = 0
        public var statesChecked = 0
        /// Power-loss states after the failure or the re-run that lost
        /// acknowledged data, did not open, or failed verify: should be 0.
        public var failedStates = 0
        public var examples: [String] = []

        public var description: String {
            "\(workload) \(model.rawValue): \(runs) injected runs (\(failedRuns) failed), \(rerunsFailed) re-runs failed, \(badDiskFullMessages) bad disk-full messages, \(statesChecked) power-loss states checked, \(failedStates) failed"
        }
    }

    /// The operation count of one clean recorded run of `workload`.
    public static func operationCount(_ workload: CrashWorkload, scratch: String) throws -> Int {
        let dir = scratch + "/count"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        return try record(workload, directory: dir).0.operationCount
    }

    /// Injects each fault in turn into a fresh run of `workload`, re-runs it
    /// without the fault, and checks the power-loss states of `model` after
    /// the failed run and at the end.
    public static func inject(_ workload: CrashWorkload, faults: [IORecorder.Fault], model: CrashModel,
                              variants: SimulatedDisk.Variants = .small, scratch: String,
                              progress: ((Int) -> Void)? = nil) -> InjectionReport {
        var report = InjectionReport(workload: workload.kind.rawValue, model: model)
        for (k, fault) in faults.enumerated() {
            progress?(k)
            let dir = scratch + "/inject-\(k)"
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let log = ExpectationLog()
            do { try workload.prepare(dir, log: log) } catch {
                report.rerunsFailed += 1
                report.examples.append("\(fault): preparing failed: \(error)")
                continue
            }
            let recorder = IORecorder(root: dir, acknowledged: log.lastMark)
            recorder.setFault(fault)
            recorder.install()
            report.runs += 1
            var firstError: Error?
            do { try workload.run(dir, log: log) { recorder.acknowledge($0) } } catch { firstError = error }
            let afterFirst = recorder.operationCount
            recorder.setFault(nil)
            var rerunError: Error?
            if firstError != nil {
                report.failedRuns += 1
                do { try workload.run(dir, log: log) { recorder.acknowledge($0) } } catch { rerunError = error }
            }
            recorder.uninstall()
            if let rerunError {
                report.rerunsFailed += 1
                if report.examples.count < 5 { report.examples.append("\(fault): the re-run failed: \(rerunError)") }
            }
            if fault.errno == ENOSPC, let e = firstError as? StepLogError, case .io(_, let path, let code) = e, code == ENOSPC {
                let line = e.description
                if !line.hasPrefix("disk full: ") || line.contains("\n") || !line.contains(path) {
                    report.badDiskFullMessages += 1
                    if report.examples.count < 5 { report.examples.append("\(fault): message '\(line)'") }
                }
            }
            var checker = CrashChecker(workload: workload, model: model)
            checker.variants = variants
            checker.onlyCrashPoints = [afterFirst]
            let states = checker.check(recorder, log: log, scratch: dir + "-states", label: workload.kind.rawValue)
            try? FileManager.default.removeItem(atPath: dir + "-states")
            report.statesChecked += states.statesChecked
            report.failedStates += states.failures
            for e in states.examples where report.examples.count < 5 { report.examples.append("\(fault): \(e)") }
        }
        return report
    }

    /// Every fault position of a run with `operations` operations, EIO and
    /// ENOSPC, once and persistent (every `stride`-th position).
    public static func faults(operations: Int, stride: Int = 1) -> [IORecorder.Fault] {
        var result: [IORecorder.Fault] = []
        for at in Swift.stride(from: 1, through: operations, by: stride) {
            for code in [EIO, ENOSPC] {
                for persistent in [false, true] { result.append(IORecorder.Fault(at: at, errno: code, persistent: persistent)) }
            }
        }
        return result
    }
}
