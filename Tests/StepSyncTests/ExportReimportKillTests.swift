import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// `stepsync ingest` of a newer synthetic export (the generator's, with 40%
/// of its step records gone, `--allow-deletions`) SIGKILLed at varying points,
/// then run again: the store ends exactly as a clean run leaves it.
@Suite(.serialized) struct ExportReimportKillTests {
    let stepsync = builtProduct("stepsync")

    static func writeExport(_ path: String, drop: Double, date: String) throws {
        var bytes: [UInt8] = []
        var writer = SyntheticExportWriter(seed: 3) { bytes += $0 }
        writer.droppedStepFraction = drop
        writer.exportDate = date
        try writer.writeExport(atLeast: 20_000_000)
        writeFile(path, bytes)
    }

    func outcome(_ store: String) throws -> KillOutcome {
        try KillOutcome.of(store, stepsync: stepsync, family: AppleHealthExportProvider.snapshotFamily)
    }

    @Test func killedReimportsFinishExactlyAsACleanRun() throws {
        let tmp = TemporaryDirectory()
        let first = tmp.sub("first.xml"), newer = tmp.sub("newer.xml")
        try Self.writeExport(first, drop: 0, date: "2024-06-30 21:14:05 -0700")
        try Self.writeExport(newer, drop: 0.4, date: "2024-07-31 21:14:05 -0700")
        let clean = tmp.sub("clean"), base = tmp.sub("base"), store = tmp.sub("killed")
        #expect(try runProgram(stepsync, ["ingest", "--store", clean, "--source", first]).code == 0)
        try FileManager.default.copyItem(atPath: clean, toPath: base)
        try FileManager.default.copyItem(atPath: base, toPath: store)
        let args = ["ingest", "--store", clean, "--source", newer, "--allow-deletions"]
        #expect(try runProgram(stepsync, args).code == 0)
        let expected = try outcome(clean)
        #expect(expected.pendingDeletions.count > 2_000)   // three batches or more
        let newerIDs = Set(try AppleHealthExportProvider(path: newer).allSamples().map(\.id.uuidString))
        #expect(Set(expected.export.map { line in String(line.split(separator: "\"")[3]) }) == newerIDs)

        var rng = SeededGenerator(seed: 17)
        var stages: [String] = []
        var attempts = 0
        // At least 12 kills, until both phases were hit (bounded).
        while (stages.count < 12 || !(stages.contains("before deleting") && stages.contains("deleting"))) && attempts < 60 {
            attempts += 1
            let child = try ChildProcess(stepsync, ["ingest", "--store", store, "--source", newer, "--allow-deletions"],
                                         mergeStandardError: true)
            if stages.count % 2 == 0 {
                usleep(UInt32.random(in: 0...300_000, using: &rng))
            } else {
                while let line = child.readLine(), !(line.hasPrefix("fetching:") && line.contains("intervals") && fetchDone(line)) {}
                usleep(UInt32.random(in: 0...10_000, using: &rng))
            }
            child.kill()
            if child.wait() == 0 {
                try FileManager.default.removeItem(atPath: store)
                try FileManager.default.copyItem(atPath: base, toPath: store)
                continue
            }
            let s = try KillOutcome.readOnly(store)
            let pending = try s.pendingDeletions(limit: 1_000_000).count
            let anchor = s.sourceAnchor(family: AppleHealthExportProvider.snapshotFamily)
            let stage = anchor == expected.anchor ? "after the anchor" : pending > 0 ? "deleting" : "before deleting"
            try s.close()
            stages.append(stage)
            if stage == "after the anchor" {
                try FileManager.default.removeItem(atPath: store)
                try FileManager.default.copyItem(atPath: base, toPath: store)
            }
        }
        #expect(stages.count >= 10, "\(stages)")
        // Where the kills landed depends on the machine's load; the proof is
        // that every state finishes below. The spread is printed.
        print("re-import kills landed in: \(Dictionary(stages.map { ($0, 1) }, uniquingKeysWith: +))")
        #expect(Set(stages).count >= 2, "\(stages)")
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", newer, "--allow-deletions"]).code == 0)
        #expect(try outcome(store) == expected)
        print("export re-import kills landed: \(stages)")
    }

    func fetchDone(_ line: String) -> Bool {
        guard let slash = line.firstIndex(of: "/"), let colon = line.firstIndex(of: ":") else { return false }
        let done = line[line.index(after: colon)..<slash].trimmingCharacters(in: .whitespaces)
        let total = line[line.index(after: slash)...].prefix { $0.isNumber || $0 == "," }
        return !done.isEmpty && done == total
    }
}
