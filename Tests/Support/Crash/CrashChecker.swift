import Foundation
import StepLog

/// Builds the states a power loss may leave from a recording (`SimulatedDisk`)
/// and checks each one: the store opens without help, holds every
/// acknowledged sample state and layering range, `StoreVerifier` finds no
/// problem, and the next writing run completes.
public struct CrashChecker {
    public struct Report: Sendable, CustomStringConvertible {
        public var workload: String
        public var model: CrashModel
        public var crashPoints = 0
        public var statesBuilt = 0
        public var distinctStates = 0
        public var statesChecked = 0
        public var failures = 0
        /// The first few failures, one line each.
        public var examples: [String] = []

        public var description: String {
            "\(workload) \(model.rawValue): \(crashPoints) crash points, \(statesBuilt) states built, \(distinctStates) distinct, \(statesChecked) checked, \(failures) failed"
        }
    }

    public var workload: CrashWorkload
    public var model: CrashModel
    public var variants = SimulatedDisk.Variants()
    /// Check a crash point after every `stride`-th operation (1: every one).
    public var stride = 1
    /// Only crash points after this many operations (error injection checks
    /// only the moments after the failure).
    public var firstCrashPoint = 0
    /// When set, only crash points after these operation counts (plus the last).
    public var onlyCrashPoints: Set<Int>?
    public var seed: UInt64 = 15_19

    public init(workload: CrashWorkload, model: CrashModel) {
        self.workload = workload
        self.model = model
    }

    public func check(_ recorder: IORecorder, log: ExpectationLog, scratch: String, label: String? = nil) -> Report {
        var report = Report(workload: label ?? workload.kind.rawValue, model: model)
        let disk = SimulatedDisk(model: model, root: recorder.root, initialFiles: recorder.initialFiles)
        var rng = SplitMix64(seed: seed)
        var acknowledged = recorder.initialAcknowledgement
        var seen = Set<Int>()
        var opIndex = 0
        let events = recorder.events
        let lastOperation = events.lastIndex { if case .operation = $0 { return true } else { return false } } ?? -1
        var n = 0
        for (i, event) in events.enumerated() {
            switch event {
            case .acknowledged(let mark):
                acknowledged = mark
                continue
            case .operation(let operation, let result):
                disk.apply(operation, result: result)
                opIndex += 1
            }
            if let only = onlyCrashPoints {
                guard only.contains(opIndex) || i == lastOperation else { continue }
            } else {
                guard opIndex > firstCrashPoint, opIndex % stride == 0 || i == lastOperation else { continue }
            }
            report.crashPoints += 1
            for files in disk.crashStates(variants, rng: &rng) {
                report.statesBuilt += 1
                var hasher = Hasher()
                for (name, bytes) in files.sorted(by: { $0.key < $1.key }) { hasher.combine(name); hasher.combine(bytes) }
                hasher.combine(acknowledged?.sequence ?? -1)
                guard seen.insert(hasher.finalize()).inserted else { continue }
                report.distinctStates += 1
                n += 1
                let dir = scratch + "/state-\(n)"
                if let problem = checkState(files, acknowledged: acknowledged, log: log, directory: dir) {
                    report.failures += 1
                    if report.examples.count < 5 {
                        report.examples.append("after op \(opIndex) (\(operation(events[i]))): \(problem)")
                    }
                }
                report.statesChecked += 1
                try? FileManager.default.removeItem(atPath: dir)
            }
        }
        return report
    }

    private func operation(_ event: RecordedEvent) -> String {
        if case .operation(let op, let result) = event { return result == 0 ? op.description : "\(op) failed: errno \(result)" }
        return ""
    }

    /// nil when the state passes; else what is wrong, in one line.
    func checkState(_ files: [String: [UInt8]], acknowledged: ExpectationLog.Mark?, log: ExpectationLog,
                    directory: String) -> String? {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for (name, bytes) in files { writeFile(Directory.join(directory, name), bytes) }
        let store: StepLogStore
        do { store = try StepLogStore.open(directory, options: workload.options) } catch { return "does not open: \(error)" }
        var closed = false
        defer { if !closed { try? store.close() } }
        if let acknowledged {
            if store.layeringRanges.count < acknowledged.ranges {
                return "\(acknowledged.ranges) layering ranges acknowledged, \(store.layeringRanges.count) found"
            }
            var lost = 0
            var example = ""
            for (id, allowed) in log.constraints(at: acknowledged) {
                let found: ExpectationLog.State
                do { found = try ExpectationLog.state(of: id, in: store) } catch { return "reading \(id): \(error)" }
                if !allowed.contains(found) {
                    lost += 1
                    if example.isEmpty { example = "\(id.uuidString.suffix(12)) is \(found), acknowledged \(allowed.map(\.description).sorted())" }
                }
            }
            if lost > 0 { return "\(lost) acknowledged samples lost or wrong (\(example))" }
        }
        // The counts by origin the open kept (from snapshots and replay) are
        // those of the live samples' current versions.
        var recount = SampleOriginCounts()
        do { try store.forEachSample { recount[$0.sample.origin] += 1 } } catch { return "reading the samples: \(error)" }
        if recount != store.samplesByOrigin { return "counts by origin \(store.samplesByOrigin), the samples \(recount)" }
        do { try workload.continueRun(store) } catch { return "the next run fails: \(error)" }
        closed = true
        do { try store.close() } catch { return "the next run fails to close: \(error)" }
        do {
            let result = try StoreVerifier.verify(directory: directory)
            if let first = result.problems.first { return "verify: \(result.problems.count) problems (\(first))" }
        } catch { return "verify fails: \(error)" }
        return nil
    }
}
