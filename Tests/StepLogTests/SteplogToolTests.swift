import Foundation
import Testing
@testable import StepLog

/// The real `steplog` binary: verify on clean and damaged stores, stats,
/// dump, recover, compact killed at random moments.
@Suite(.serialized) struct SteplogToolTests {
    let steplog = builtProduct("steplog")

    func run(_ args: [String]) throws -> (code: Int32, lines: [String]) { try runProgram(steplog, args, mergeStandardError: true) }

    func sealedStore(_ dir: String) throws {
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 120, seed: 31)
        let store = try StepLogStore.open(dir)
        store.waitForSnapshots()
        try store.close()
    }

    @Test func verifySaysOKOnACleanStoreAndFindsPlantedDamage() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference")
        try sealedStore(reference)
        var r = try verifyWithoutWriting(reference)
        #expect(r.code == 0 && r.lines.last?.hasPrefix("OK") == true, "\(r.lines.suffix(4))")
        let segments = segmentFiles(reference).map { ($0 as NSString).lastPathComponent }
        let hints = try FileManager.default.contentsOfDirectory(atPath: reference).filter { $0.hasSuffix(".hint") }.sorted()
        #expect(segments.count >= 5 && hints.count == segments.count - 1)

        // A bit flip in the middle of a sealed segment.
        let work = tmp.sub("work")
        try copyDirectory(reference, to: work)
        var bytes = readFile(work + "/" + segments[1])
        bytes[bytes.count / 2] ^= 0x20
        writeFile(work + "/" + segments[1], bytes)
        r = try verifyWithoutWriting(work)
        let problems = r.lines.dropLast().filter { !$0.hasPrefix("note:") }.count
        #expect(r.code == 1 && r.lines.last == "\(problems) problem\(problems == 1 ? "" : "s") found")
        #expect(r.lines.contains { $0.hasPrefix(segments[1] + " @ ") && $0.contains("checksum") }, "\(r.lines)")
        // The segment's snapshot no longer matches its (damaged) segment either way; the store's later segments are still checked.
        // A truncated snapshot.
        try copyDirectory(reference, to: work)
        let hint = readFile(work + "/" + hints[2])
        writeFile(work + "/" + hints[2], Array(hint.prefix(hint.count / 2)))
        r = try verifyWithoutWriting(work)
        #expect(r.code == 1)
        #expect(r.lines.contains { $0.hasPrefix(hints[2]) && $0.contains("snapshot") }, "\(r.lines)")
        // A missing segment.
        try copyDirectory(reference, to: work)
        try FileManager.default.removeItem(atPath: work + "/" + segments[2])
        r = try verifyWithoutWriting(work)
        #expect(r.code == 1)
        #expect(r.lines.contains { $0.contains("segment \(segments[2]) is missing") }, "\(r.lines)")
        #expect(r.lines.last?.hasSuffix("found") == true)
    }

    /// Runs `steplog verify` and checks that it wrote nothing: every file of
    /// the store (names and bytes) is as it was before it ran.
    func verifyWithoutWriting(_ dir: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> (code: Int32, lines: [String]) {
        let before = storeFiles(dir)
        let r = try run(["verify", dir])
        let after = storeFiles(dir)
        let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
        #expect(changed.isEmpty, "verify changed \(changed)", sourceLocation: sourceLocation)
        return r
    }

    /// Every file in `dir` with its bytes.
    func storeFiles(_ dir: String) -> [String: [UInt8]] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return Dictionary(uniqueKeysWithValues: names.map { ($0, readFile(dir + "/" + $0)) })
    }

    @Test func statsDumpAndRecover() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try sealedStore(dir)
        var r = try run(["stats", dir, "--json"])
        #expect(r.code == 0)
        let stats = try #require(try JSONSerialization.jsonObject(with: Data(r.lines[0].utf8)) as? [String: Any])
        for key in ["segments", "bytes", "liveBytes", "records", "liveRecords", "deadBytes", "recordsByType", "samples", "intervals"] {
            #expect(stats[key] != nil, "stats --json lacks \(key)")
        }
        #expect((stats["liveRecords"] as! Int) < (stats["records"] as! Int))
        r = try run(["dump", dir, "--segment", "1", "--json"])
        #expect(r.code == 0 && !r.lines.isEmpty)
        #expect(r.lines.allSatisfy { $0.hasPrefix("{\"segment\":\"000000000001.log\",\"offset\":") })
        r = try run(["dump", dir, "--segment", "999"])
        #expect(r.code == 1)
        // recover: damage in a sealed segment → the prefix is kept and the rest set aside.
        let segments = segmentFiles(dir)
        var bytes = readFile(segments[2])
        bytes[bytes.count / 3] ^= 0x01
        writeFile(segments[2], bytes)
        r = try run(["recover", dir])
        #expect(r.code == 0)
        #expect(r.lines.contains { $0.contains("set aside in \(dir).salvage-") }, "\(r.lines)")
        #expect(try run(["verify", dir]).code == 0)
        r = try run(["recover", dir])
        #expect(r.lines == ["nothing to recover: every record is intact"])
    }

    @Test func usageErrorsAndLocks() throws {
        let tmp = TemporaryDirectory()
        #expect(try run([]).code == 2)
        #expect(try run(["frobnicate", tmp.path]).code == 2)
        #expect(try run(["verify"]).code == 2)
        #expect(try run(["stats", tmp.path, "--colour"]).code == 2)
        for command in ["verify", "stats", "dump", "recover", "compact"] {
            let r = try run([command, "--help"])
            #expect(r.code == 0 && r.lines.first?.hasPrefix("usage: steplog \(command)") == true)
        }
        let r = try run(["verify", tmp.sub("missing")])
        #expect(r.code == 1 && r.lines.count == 1 && r.lines[0].contains("no such directory"))
        let dir = tmp.sub("store")
        let holder = try StepLogStore.open(dir)
        let locked = try run(["compact", dir])
        #expect(locked.code == 1 && locked.lines.last?.contains("store is locked by pid \(getpid())") == true)
        try holder.close()
    }

    @Test func compactKilledAtRandomMomentsNeverLosesAnything() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference")
        // About 5 MB in 20 segments, with changed versions and synced markers (dead records).
        let writer = try ChildProcess(builtProduct("steplog-crash-writer"), [reference, "--batches", "60", "--segment-size", String(256 << 10)])
        while writer.readLine() != nil {}
        #expect(writer.wait() == 0)
        let expected = try StoreDigest.of(try StepLogStore.open(reference, options: .fullReplayReadOnly))
        // How long a whole `steplog compact` takes here, start to exit, so the
        // kills spread over its phases whatever the machine's speed.
        let calibration = tmp.sub("calibration")
        try copyDirectory(reference, to: calibration)
        let started = DispatchTime.now().uptimeNanoseconds
        #expect(try run(["compact", calibration]).code == 0)
        let wholeRun = UInt32(min((DispatchTime.now().uptimeNanoseconds - started) / 1_000, 5_000_000))
        var rng = SeededGenerator(seed: 5)
        var outcomes: [String: Int] = [:]
        for _ in 0..<24 {
            let work = tmp.sub("work")
            try copyDirectory(reference, to: work)
            let child = try ChildProcess(steplog, ["compact", work])
            usleep(UInt32.random(in: 0...wholeRun, using: &rng))
            child.kill()
            let code = child.wait()
            let reopened = try StepLogStore.open(work, options: .fullReplay)
            #expect(try StoreDigest.of(reopened) == expected)
            let report = reopened.openReport
            outcomes[code == 0 ? "finished" : !report.compactionFinished.isEmpty ? "committed, inputs left"
                : !report.compactionDiscarded.isEmpty || !report.removedTemporaryFiles.isEmpty ? "uncommitted" : "not started", default: 0] += 1
            try reopened.close()
            let later = try run(["compact", work])
            #expect(later.code == 0)
            let after = try StepLogStore.open(work, options: .fullReplayReadOnly)
            #expect(try StoreDigest.of(after) == expected)
            #expect(try after.figures().deadBytes == 0)
        }
        // The kills should land in more than one phase.
        #expect(outcomes.count >= 2, "\(outcomes)")
        print("compact kill test outcomes: \(outcomes)")
    }
}
