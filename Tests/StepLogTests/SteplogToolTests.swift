import Foundation
import Testing
@testable import StepLog
@testable import steplog
import ToolSupport

/// `steplog`: verify on clean and damaged stores, stats, dump, recover,
/// compact. The commands run in this process, as bbolt's command tests run
/// theirs (what they print and their exit codes are the same as a child's);
/// only compact killed at random moments runs the real binary, to kill it.
@Suite(.serialized) struct SteplogToolTests {
    /// Runs `steplog args` here: its output and errors together, as a terminal shows them, one line each.
    func run(_ args: [String]) async -> (code: Int32, lines: [String]) {
        let output = OutputSink.capturing()
        let code = await SteplogTool.run(args, out: output, err: output)
        var lines = output.text.components(separatedBy: "\n")
        if lines.last == "" { lines.removeLast() }
        return (code, lines)
    }

    /// A sealed store held open for writing by this process (16 KiB segments), and its digest.
    func holdingSealedStore(_ dir: String) throws -> (StepLogStore, StoreDigest) {
        try sealedStore(dir)
        var options = StoreOptions()
        options.segmentSize = 16 << 10
        let holder = try StepLogStore.open(dir, options: options)
        return (holder, try StoreDigest.of(holder))
    }

    func sealedStore(_ dir: String) throws {
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 120, seed: 31)
        let store = try StepLogStore.open(dir)
        store.waitForSnapshots()
        try store.close()
    }

    @Test func verifySaysOKOnACleanStoreAndFindsPlantedDamage() async throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference")
        try sealedStore(reference)
        var r = try await verifyWithoutWriting(reference)
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
        r = try await verifyWithoutWriting(work)
        let problems = r.lines.dropLast().filter { !$0.hasPrefix("note:") }.count
        #expect(r.code == 1 && r.lines.last == "\(problems) problem\(problems == 1 ? "" : "s") found")
        #expect(r.lines.contains { $0.hasPrefix(segments[1] + " @ ") && $0.contains("checksum") }, "\(r.lines)")
        // The segment's snapshot no longer matches its (damaged) segment either way; the store's later segments are still checked.
        // A truncated snapshot.
        try copyDirectory(reference, to: work)
        let hint = readFile(work + "/" + hints[2])
        writeFile(work + "/" + hints[2], Array(hint.prefix(hint.count / 2)))
        r = try await verifyWithoutWriting(work)
        #expect(r.code == 1)
        #expect(r.lines.contains { $0.hasPrefix(hints[2]) && $0.contains("snapshot") }, "\(r.lines)")
        // A missing segment.
        try copyDirectory(reference, to: work)
        try FileManager.default.removeItem(atPath: work + "/" + segments[2])
        r = try await verifyWithoutWriting(work)
        #expect(r.code == 1)
        #expect(r.lines.contains { $0.contains("segment \(segments[2]) is missing") }, "\(r.lines)")
        #expect(r.lines.last?.hasSuffix("found") == true)
    }

    /// Runs `steplog verify` and checks that it wrote nothing: every file of
    /// the store (names and bytes) is as it was before it ran.
    func verifyWithoutWriting(_ dir: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> (code: Int32, lines: [String]) {
        let before = try storeFiles(dir, includingLock: true)
        let r = await run(["verify", dir])
        let after = try storeFiles(dir, includingLock: true)
        let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
        #expect(changed.isEmpty, "verify changed \(changed)", sourceLocation: sourceLocation)
        return r
    }

    @Test func statsDumpAndRecover() async throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try sealedStore(dir)
        var r = await run(["stats", dir, "--json"])
        #expect(r.code == 0)
        let stats = try #require(try JSONSerialization.jsonObject(with: Data(r.lines[0].utf8)) as? [String: Any])
        for key in ["segments", "bytes", "liveBytes", "records", "liveRecords", "deadBytes", "syncMarkBytes", "recordsByType", "samples",
                    "pendingDeletions", "tombstones", "intervals"] {
            #expect(stats[key] != nil, "stats --json lacks \(key)")
        }
        #expect((stats["liveRecords"] as! Int) < (stats["records"] as! Int))
        // Tombstones: every one written, and those still pending (the live ones).
        let store = try StepLogStore.open(dir, options: .fullReplayReadOnly)
        let figures = try store.figures()
        let tombstones = try #require(stats["tombstones"] as? [String: Int])
        #expect(tombstones["records"] == figures.byType[.sampleDeleted]?.records && tombstones["records"]! > 0)
        #expect(tombstones["liveRecords"] == store.counts.pendingDeletions && stats["pendingDeletions"] as? Int == store.counts.pendingDeletions)
        #expect(store.counts.pendingDeletions > 0 && tombstones["liveRecords"]! < tombstones["records"]!)
        #expect((stats["syncMarkBytes"] as! Int) == figures.syncMarkBytes && figures.syncMarkBytes > 0)
        // Samples the server rejected: counted apart from the unsynced ones.
        #expect(stats["rejectedSamples"] as? Int == store.counts.rejectedSamples && store.counts.rejectedSamples > 0)
        #expect(store.counts.samples == store.counts.syncedSamples + store.counts.unsyncedSamples + store.counts.rejectedSamples)
        let text = await run(["stats", dir])
        #expect(text.lines.contains { $0.contains("tombstones: ") && $0.contains("deletions waiting for the server: \(store.counts.pendingDeletions)") }, "\(text.lines)")
        r = await run(["dump", dir, "--segment", "1", "--json"])
        #expect(r.code == 0 && !r.lines.isEmpty)
        #expect(r.lines.allSatisfy { $0.hasPrefix("{\"segment\":\"000000000001.log\",\"offset\":") })
        // Every record type is shown by name, with its fields.
        let all = await run(["dump", dir]).lines
        for (type, field) in [("sampleDeleted", "deletedAt="), ("syncedThrough", "offset="), ("padding", "zeros="),
                              ("sourceAnchor", "anchor=\"batch "), ("samplesAcknowledged", "ids="), ("sampleUpsert", "origin="),
                              ("samplesRejected", "reasons=[")] {
            #expect(all.contains { $0.contains(" \(type) ") && $0.contains(field) }, "dump shows no \(type) with \(field)")
        }
        #expect(all.first?.hasPrefix("000000000001.log: version 3, sequence 1, base position 0") == true && all.first?.contains("records from offset 4096") == true)
        r = await run(["dump", dir, "--segment", "999"])
        #expect(r.code == 1)
        // recover: damage in a sealed segment → the prefix is kept and the rest set aside.
        let segments = segmentFiles(dir)
        var bytes = readFile(segments[2])
        bytes[bytes.count / 3] ^= 0x01
        writeFile(segments[2], bytes)
        r = await run(["recover", dir])
        #expect(r.code == 0)
        #expect(r.lines.contains { $0.contains("set aside in \(dir).salvage-") }, "\(r.lines)")
        #expect(await run(["verify", dir]).code == 0)
        r = await run(["recover", dir])
        #expect(r.lines == ["nothing to recover: every record is intact"])
    }

    @Test func usageErrorsAndLocks() async throws {
        let tmp = TemporaryDirectory()
        #expect(await run([]).code == 2)
        #expect(await run(["frobnicate", tmp.path]).code == 2)
        #expect(await run(["verify"]).code == 2)
        #expect(await run(["stats", tmp.path, "--colour"]).code == 2)
        for command in ["verify", "stats", "dump", "recover", "compact"] {
            let r = await run([command, "--help"])
            #expect(r.code == 0 && r.lines.first?.hasPrefix("usage: steplog \(command)") == true)
        }
        let r = await run(["verify", tmp.sub("missing")])
        #expect(r.code == 1 && r.lines.count == 1 && r.lines[0].contains("no such directory"))
        let dir = tmp.sub("store")
        let holder = try StepLogStore.open(dir)
        let locked = await run(["compact", dir, "--wait", "0"]) // 0: do not ask the holder
        #expect(locked.code == 1 && locked.lines.last?.contains("store is locked by pid \(getpid())") == true)
        try holder.close()
        // A holder that never looks at requests (a stopped process, a build from before
        // writers looked on a timer): it holds the lock, no store. One line naming it,
        // exit 1 after the wait, nothing left behind.
        let lock = try FileLock(path: dir + "/LOCK", exclusive: true)
        let unanswered = await run(["compact", dir, "--wait", "1"])
        #expect(unanswered.code == 1 && unanswered.lines.last?.hasPrefix("steplog compact: ") == true, "\(unanswered.lines)")
        #expect(unanswered.lines.last?.contains("store is locked by pid \(getpid())") == true, "\(unanswered.lines)")
        #expect(unanswered.lines.last?.contains("did not take the compaction request within 1.00 s") == true, "\(unanswered.lines)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/" + StepLogStore.compactionRequestFileName))
        withExtendedLifetime(lock) {}
    }

    /// A holder that does nothing (an idle stepsync: no writes, no syncs)
    /// answers `steplog compact` within seconds, not at its next write.
    @Test func compactIsAnsweredByAnIdleHolder() async throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        let (holder, expected) = try holdingSealedStore(dir)
        let started = Date()
        let r = await run(["compact", dir, "--wait", "20", "--json"])
        let seconds = Date().timeIntervalSince(started)
        #expect(r.code == 0, "\(r.lines)")
        #expect(r.lines.last?.contains("\"compactedBy\":\"pid \(getpid())\"") == true, "\(r.lines)")
        #expect(seconds < 15, "answered after \(seconds) s")
        holder.waitForBackgroundCompaction()
        #expect(holder.backgroundCompactions == 1)
        #expect(try StoreDigest.of(holder) == expected)
        try holder.close()
        #expect(try StoreDigest.of(try StepLogStore.open(dir, options: .fullReplayReadOnly)) == expected, "reopened by replay")
    }

    /// `steplog compact` on a store another process holds asks that process,
    /// which compacts in its background at its next sync and answers.
    @Test func compactAsksTheProcessHoldingTheStore() async throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        let (holder, expected) = try holdingSealedStore(dir)
        let done = FirstError()
        let writer = Thread {
            // The holder keeps syncing (an ingest would), as nothing else happens.
            while done.first == nil {
                do { try holder.sync() } catch { done.record(error) }
            }
        }
        writer.start()
        let r = await run(["compact", dir, "--wait", "60", "--json"])
        done.record(CancellationError())
        holder.waitForBackgroundCompaction()
        #expect(r.code == 0, "\(r.lines)")
        #expect(r.lines.last?.contains("\"compactedBy\":\"pid \(getpid())\"") == true, "\(r.lines)")
        #expect(holder.backgroundCompactions == 1)
        #expect(try StoreDigest.of(holder) == expected)
        try holder.close()
    }

    /// #20.6: each command names the real problem with a wrong path or segment.
    @Test func wrongPathsAndSegmentsNameTheRealProblem() async throws {
        let tmp = TemporaryDirectory()
        let file = tmp.sub("a-file")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        for command in ["verify", "stats", "dump"] {
            let r = await run([command, file])
            #expect(r.code == 1 && r.lines.count == 1 && r.lines[0] == "steplog \(command): \(file) is not a StepLog store: it is a file, not a directory",
                    "\(command): \(r.lines)")
        }
        let dir = tmp.sub("store")
        let store = try StepLogStore.open(dir)
        _ = try store.upsert([makeSample(1), makeSample(2)], fetchedAt: Date())
        try store.close()
        #expect(await run(["compact", dir]).code == 0)
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir).compactMap { SegmentName.sequence(of: $0) }
        #expect(segments.count == 1 && segments[0] != 1, "compaction renumbers the only segment: \(segments)")
        let r = await run(["dump", dir, "--segment", "1"])
        // The directory is a store all right: it has other segments.
        #expect(r.code == 1 && r.lines == ["steplog dump: \(dir) has no segment 1; its segments are \(segments[0]) (a compaction writes its segments under new numbers)"])
        // A directory that is not a store is refused and left as it was: no LOCK file in it.
        let other = tmp.sub("photos")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        writeFile(other + "/IMG_0001.jpg", [0xFF, 0xD8])
        for command in [["compact", other], ["recover", other], ["stats", other], ["verify", other]] {
            let refused = await run(command)
            #expect(refused.code == 1 && refused.lines == ["steplog \(command[0]): \(other) is not a StepLog store: it holds files that are not StepLog files (IMG_0001.jpg) and no segments"],
                    "\(refused.lines)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: other) == ["IMG_0001.jpg"], "\(command[0]) left a file")
        }
        #expect(throws: StepLogError.self) { try StepLogStore.open(other) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: other) == ["IMG_0001.jpg"])
        #expect(await run(["dump", dir, "--segment", String(segments[0])]).code == 0)
    }

    @Test func compactKilledAtRandomMomentsNeverLosesAnything() async throws {
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
        #expect(await run(["compact", calibration]).code == 0)
        let wholeRun = UInt32(min((DispatchTime.now().uptimeNanoseconds - started) / 1_000, 5_000_000))
        var rng = SeededGenerator(seed: 5)
        var outcomes: [String: Int] = [:]
        for _ in 0..<24 {
            let work = tmp.sub("work")
            try copyDirectory(reference, to: work)
            let child = try ChildProcess(builtProduct("steplog"), ["compact", work])
            usleep(UInt32.random(in: 0...wholeRun, using: &rng))
            child.kill()
            let code = child.wait()
            let reopened = try StepLogStore.open(work, options: .fullReplay)
            #expect(try StoreDigest.of(reopened) == expected)
            let report = reopened.openReport
            outcomes[code == 0 ? "finished" : !report.compactionFinished.isEmpty ? "committed, inputs left"
                : !report.compactionDiscarded.isEmpty || !report.removedTemporaryFiles.isEmpty ? "uncommitted" : "not started", default: 0] += 1
            try reopened.close()
            let later = await run(["compact", work])
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

/// `steplog verify`'s version 2 checks, each on a store with one planted
/// inconsistency that every checksum still accepts.
@Suite struct VerifyVersionTwoTests {
    /// A closed store of several segments with every record type.
    func store(_ dir: String) throws -> [FoundRecord] {
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 80, seed: 41)
        return try readAllRecords(dir)
    }

    /// Rewrites the record at `r` in place with `payload` (same size), checksummed.
    func rewrite(_ r: FoundRecord, type: UInt8, payload: [UInt8]) {
        precondition(payload.count == r.size - 9)
        var bytes = readFile(r.segment)
        bytes.replaceSubrange(Int(r.offset)..<Int(r.end), with: SegmentReaderTests.raw(type: type, payload))
        writeFile(r.segment, bytes)
    }

    func problems(_ dir: String) throws -> [StoreVerifier.Problem] { try StoreVerifier.verify(directory: dir).problems }

    @Test func aCleanStoreHasNone() throws {
        let tmp = TemporaryDirectory()
        _ = try store(tmp.path)
        #expect(try problems(tmp.path).isEmpty)
    }

    @Test func aNonZeroByteInTheHeaderBlock() throws {
        let tmp = TemporaryDirectory()
        _ = try store(tmp.path)
        let path = segmentFiles(tmp.path)[1]
        var bytes = readFile(path)
        bytes[1_000] = 1
        writeFile(path, bytes)
        #expect(try problems(tmp.path).map(\.description) == [(path as NSString).lastPathComponent + " @ 1000: non-zero byte in the header block (records start at 4096)"])
    }

    @Test func syncedThroughClaimsPastItselfOrBackwards() throws {
        let tmp = TemporaryDirectory()
        let records = try store(tmp.path)
        let marks = records.filter { if case .syncedThrough = $0.record { return $0.segmentIndex == 0 }; return false }
        #expect(marks.count >= 2)
        rewrite(marks[0], type: 8, payload: withUnsafeBytes(of: UInt64(marks[0].offset + 1).littleEndian, Array.init))
        var found = try problems(tmp.path)
        #expect(found.contains { $0.offset == marks[0].offset && $0.what.contains("claims offset \(marks[0].offset + 1), outside") }, "\(found)")
        let second = TemporaryDirectory()
        let again = try store(second.path)
        let marks2 = again.filter { if case .syncedThrough = $0.record { return $0.segmentIndex == 0 }; return false }
        rewrite(marks2[1], type: 8, payload: withUnsafeBytes(of: UInt64(4_096).littleEndian, Array.init))
        found = try problems(second.path)
        #expect(found.contains { $0.offset == marks2[1].offset && $0.what.contains("before an earlier claim") }, "\(found)")
    }

    @Test func paddingThatIsNotZero() throws {
        let tmp = TemporaryDirectory()
        let records = try store(tmp.path)
        let pad = try #require(records.first { if case .padding(let n) = $0.record { return n > 4 && $0.segmentIndex == 0 }; return false })
        var payload = [UInt8](repeating: 0, count: pad.size - 9)
        payload[3] = 0x55
        rewrite(pad, type: 9, payload: payload)
        #expect(try problems(tmp.path).contains { $0.offset == pad.offset && $0.what == "padding holds a non-zero byte at payload offset 3" })
        // Opening refuses it too: a checksummed record that is not what its type says.
        #expect(throws: StepLogError.corruption(path: pad.segment, offset: pad.offset, kind: .malformedRecord(.nonZeroPadding(at: 3)))) {
            _ = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)
        }
    }
}
