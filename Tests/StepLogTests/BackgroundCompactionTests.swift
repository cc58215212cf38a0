import Foundation
import Testing
@testable import StepLog

/// Compaction while the store is in use: the contents equal a run without
/// compaction, whatever the writer did meanwhile and wherever a crash stops it.
@Suite struct BackgroundCompactionTests {
    let segmentSize = 8 << 10
    var options: StoreOptions {
        var o = StoreOptions(segmentSize: segmentSize)
        o.compactionDeadBytes = 0 // only the compactions a test starts
        return o
    }

    /// What a user of the store does between two steps of a compaction: a new
    /// sample, a changed version of an old one, a deletion, acknowledgements
    /// of samples and deletions, a rejection, an interval status; then a sync.
    /// Deterministic given the store's contents, so a store without a
    /// compaction given the same calls ends with the same contents.
    static func useStore(_ store: StepLogStore, round: Int) throws {
        let r = UInt64(round)
        var batch = [makeSample(700_000 + r, count: round)]
        if case .live(let old) = try store.sampleState(id: .test(r * 7 % 150)) {
            var changed = old.sample
            changed.count += 1_000
            batch.append(changed)
        }
        try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: 10_000 + Double(round)))
        try store.delete([.test(r * 13 % 150 + 1)], at: Date(timeIntervalSince1970: 10_000 + Double(round)))
        try store.markSynced(try store.unsyncedSamples(limit: 3))
        try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: 1))
        if round % 3 == 0 {
            let refused = try store.unsyncedSamples(limit: 1)
            try store.markRejected(refused.map { ($0, "refused in round \(round)") }, at: Date(timeIntervalSince1970: 10_000 + Double(round)))
        }
        try store.recordIntervals([SyncInterval(id: .test(1_000_000 + r % 3), startMilliseconds: Int64(r % 3) * 10, endMilliseconds: Int64(r % 3) * 10 + 10,
                                                stepCount: Int64(round), status: .fetched)])
        try store.sync()
    }

    /// The reference history, written and closed.
    func history(_ dir: String) throws {
        _ = try writeKnownHistory(dir, segmentSize: segmentSize, batches: 150, seed: 33, options: options)
    }

    /// The contents of a copy of `reference` after `rounds` rounds of `useStore`, without compaction.
    func expected(_ reference: String, rounds: Int, in dir: String) throws -> StoreDigest {
        try copyDirectory(reference, to: dir)
        let store = try StepLogStore.open(dir, options: options)
        for round in 0..<rounds { try Self.useStore(store, round: round) }
        try store.close()
        return try StoreDigest.of(try StepLogStore.open(dir, options: .fullReplayReadOnly))
    }

    /// Where two digests differ (for the failure message).
    static func difference(_ a: StoreDigest, _ b: StoreDigest) -> String {
        guard a != b else { return "" }
        var parts: [String] = []
        let sa = Dictionary(a.samples.map { ($0.id, $0) }, uniquingKeysWith: { x, _ in x })
        let sb = Dictionary(b.samples.map { ($0.id, $0) }, uniquingKeysWith: { x, _ in x })
        for id in Set(sa.keys).union(sb.keys).sorted() where sa[id] != sb[id] {
            parts.append("sample \(id): \(sa[id].map { "\($0.sample.count) synced \($0.synced)" } ?? "absent") vs \(sb[id].map { "\($0.sample.count) synced \($0.synced)" } ?? "absent")")
            if parts.count > 5 { break }
        }
        if a.deletions != b.deletions { parts.append("deletions \(a.deletions.count) vs \(b.deletions.count)") }
        if a.intervals != b.intervals { parts.append("intervals") }
        if a.ranges != b.ranges { parts.append("ranges") }
        if a.highScores != b.highScores { parts.append("high scores") }
        if a.anchors != b.anchors { parts.append("anchors") }
        if a.rejected != b.rejected { parts.append("rejected \(a.rejected) vs \(b.rejected)") }
        return parts.joined(separator: "; ")
    }

    func verify(_ dir: String) throws {
        let result = try StoreVerifier.verify(directory: dir)
        #expect(result.problems.isEmpty, "\(result.problems)")
    }

    @Test func compactingWhileTheStoreIsUsedKeepsItsContents() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        try history(reference)
        try copyDirectory(reference, to: work)
        let store = try StepLogStore.open(work, options: options)
        let segmentsBefore = store.segmentInfos.count
        var round = 0
        var steps: [CompactionStep] = []
        // The store is used between every two steps, and on its own thread while the compaction runs.
        let report = try store.compactInBackground(stop: { step in
            steps.append(step)
            try Self.useStore(store, round: round)
            round += 1
        })
        #expect(steps.first == .started && steps.last == .finished && steps.contains(.committed))
        #expect(report.before.deadBytes > 0 && report.after.deadBytes == 0)
        #expect(report.after.bytes < report.before.bytes)
        for _ in 0..<10 {
            try Self.useStore(store, round: round)
            round += 1
        }
        let expected = try expected(reference, rounds: round, in: tmp.sub("expected"))
        let inUse = try StoreDigest.of(store)
        #expect(inUse == expected, "the store in use: \(Self.difference(inUse, expected))")
        #expect(store.segmentInfos.count < segmentsBefore + round)
        try store.close()
        try verify(work)
        let reopened = try StepLogStore.open(work, options: .fullReplay)
        #expect(try StoreDigest.of(reopened) == expected, "reopened")
        #expect(reopened.openReport.compactionFinished.isEmpty && reopened.openReport.compactionDiscarded.isEmpty)
        // A second compaction (in the background again, then offline) agrees.
        _ = try reopened.compactInBackground()
        try reopened.close()
        _ = try StepLogStore.compact(directory: work, options: options)
        #expect(try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly)) == expected)
        try verify(work)
    }

    struct Crash: Error {}

    /// A crash (the process dies: nothing more is written) after any step,
    /// with the store used between steps: reopening keeps everything synced.
    @Test func aCrashAfterAnyStepLosesNothingTheWriterSynced() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference")
        try history(reference)
        // The steps of a full run.
        var all: [CompactionStep] = []
        do {
            let probe = tmp.sub("probe")
            try copyDirectory(reference, to: probe)
            let store = try StepLogStore.open(probe, options: options)
            var round = 0
            _ = try store.compactInBackground(stop: { all.append($0); try Self.useStore(store, round: round); round += 1 })
            try store.close()
        }
        #expect(all.count > 10)
        // Removing input n and n + 1 leave the same kind of state: the first and last stand for them all.
        let removals = all.filter { if case .inputRemoved = $0 { return true }; return false }
        for (i, step) in all.enumerated() where !removals.contains(step) || step == removals.first || step == removals.last {
            let expected = tmp.sub("expected")
            try copyDirectory(reference, to: expected)
            do {
                let store = try StepLogStore.open(expected, options: options)
                for round in 0...i { try Self.useStore(store, round: round) }
                try store.close()
            }
            let digest = try StoreDigest.of(try StepLogStore.open(expected, options: .fullReplayReadOnly))

            let work = tmp.sub("work")
            try copyDirectory(reference, to: work)
            let store = try StepLogStore.open(work, options: options)
            var round = 0
            #expect(throws: Crash.self) {
                _ = try store.compactInBackground(stop: { s in
                    try Self.useStore(store, round: round)
                    round += 1
                    if s == step { throw Crash() }
                })
            }
            store.abandon()
            try verify(work)
            let reopened = try StepLogStore.open(work, options: .fullReplay)
            let found = try StoreDigest.of(reopened)
            #expect(found == digest, "after a crash at '\(step)': \(Self.difference(found, digest))")
            // Used again and compacted again, it still agrees.
            try Self.useStore(reopened, round: 1_000)
            _ = try reopened.compactInBackground()
            try reopened.close()
            let again = try StepLogStore.open(work, options: .fullReplayReadOnly)
            let expectedStore = try StepLogStore.open(expected, options: options)
            try Self.useStore(expectedStore, round: 1_000)
            #expect(try StoreDigest.of(again) == StoreDigest.of(expectedStore), "compacted again after a crash at '\(step)'")
            try expectedStore.close()
        }
    }

    /// The compactor's own thread, racing a writer thread that upserts,
    /// acknowledges and deletes; then the store is closed mid-compaction
    /// (which abandons an uncommitted one) and reopened.
    @Test func theBackgroundThreadRacesTheWriterAndClosingStopsIt() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        try history(reference)
        try copyDirectory(reference, to: work)
        let rounds = 60
        let expected = try expected(reference, rounds: rounds, in: tmp.sub("expected"))
        let store = try StepLogStore.open(work, options: options)
        #expect(store.startBackgroundCompaction())
        for round in 0..<rounds {
            try Self.useStore(store, round: round)
            if round == rounds / 2 {
                store.waitForBackgroundCompaction()
                #expect(store.backgroundCompactions == 1, "\(String(describing: store.backgroundCompactionError))")
                #expect(store.startBackgroundCompaction())
            }
        }
        #expect(try StoreDigest.of(store) == expected)
        try store.close() // the second compaction may be anywhere: closing stops or finishes it
        try verify(work)
        #expect(try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly)) == expected)
    }

    @Test func deadBytesPastTheThresholdsStartACompaction() throws {
        let tmp = TemporaryDirectory()
        let work = tmp.sub("work")
        try history(work)
        let expected = try expected(work, rounds: 0, in: tmp.sub("expected"))
        var automatic = options
        automatic.compactionDeadBytes = 1
        automatic.compactionDeadFraction = 0.2
        let store = try StepLogStore.open(work, options: automatic) // checked on open
        store.waitForBackgroundCompaction()
        #expect(store.backgroundCompactions == 1)
        #expect(try StoreDigest.of(store) == expected)
        try store.close()
        // Below the fraction now: opening starts nothing.
        let again = try StepLogStore.open(work, options: automatic)
        again.waitForBackgroundCompaction()
        #expect(again.backgroundCompactions == 0)
        try again.close()
    }

    /// A round of heavier use than `useStore`: `new` new samples (at most
    /// 2,000), a changed version of 300 of the previous round's, 40
    /// deletions, 250 samples and 20 deletions acknowledged, then a sync.
    /// Deterministic given the store's contents: an acknowledgement that a
    /// background compaction's switch made miss (the positions changed) is
    /// read and made again.
    static func useHeavily(_ store: StepLogStore, round: Int, new: Int = 300) throws {
        let base = 2_000_000 + UInt64(round) * 2_000
        var batch = (0..<UInt64(new)).map { makeSample(base + $0, count: round % 500) }
        if round > 0 { batch += (0..<300).map { makeSample(base - 2_000 + $0, count: 1_000 + round) } }
        let at = Date(timeIntervalSince1970: 20_000 + Double(round))
        try store.upsert(batch, fetchedAt: at)
        if round > 1 { try store.delete((0..<40).map { UUID.test(base - 4_000 + $0 * 7) }, at: at) }
        var samples = 250, deletions = 20
        while samples > 0 {
            let read = try store.unsyncedSamples(limit: samples)
            if read.isEmpty { break }
            samples -= try store.markSynced(read)
        }
        while deletions > 0 {
            let read = try store.pendingDeletions(limit: deletions)
            if read.isEmpty { break }
            deletions -= try store.markDeletionsAcknowledged(read)
        }
        try store.sync()
    }

    /// A store opened with small segments (64–256 KiB) and the automatic
    /// trigger, holding segments larger than that — written by a writer at the
    /// default size, or by an offline compaction (`steplog compact` compacts
    /// at the default size) — compacts in the background, round after round:
    /// its outputs roll at the small size, so they are more than its inputs,
    /// and the reservation must hold them. Reopened by replay, it holds what a
    /// store never compacted holds.
    @Test(arguments: [64 << 10, 128 << 10, 256 << 10])
    func smallSegmentsCompactInTheBackgroundAStoreWrittenWithLargerOnes(segmentSize small: Int) throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work"), expected = tmp.sub("expected")
        var quiet = StoreOptions(segmentSize: small)
        quiet.compactionDeadBytes = 0
        do {
            let store = try StepLogStore.open(reference, options: quiet)
            for round in 0..<20 { try Self.useHeavily(store, round: round, new: 1_500) }
            try store.close()
        }
        var large = StoreOptions(createIfMissing: false)
        large.compactionDeadBytes = 0
        _ = try StepLogStore.compact(directory: reference, options: large)
        do {
            let store = try StepLogStore.open(reference, options: large)
            for round in 20..<30 { try Self.useHeavily(store, round: round) }
            try store.close()
        }
        // One segment, continued by the writer after the offline compaction: far larger than the small size.
        let largest = segmentFiles(reference).map { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? 0 }.max() ?? 0
        #expect(largest > 8 * small, "the largest segment holds \(largest) bytes")

        // The same use without compaction: what the compacted store must hold.
        try copyDirectory(reference, to: expected)
        do {
            let store = try StepLogStore.open(expected, options: quiet)
            for round in 30..<60 { try Self.useHeavily(store, round: round) }
            try store.close()
        }
        let digest = try StoreDigest.of(try StepLogStore.open(expected, options: .fullReplayReadOnly))

        try copyDirectory(reference, to: work)
        var automatic = StoreOptions(segmentSize: small)
        automatic.compactionDeadBytes = Int64(2 * small)
        automatic.compactionDeadFraction = 0.1
        let store = try StepLogStore.open(work, options: automatic) // dead enough: the open starts one
        var failures: [String] = []
        for round in 30..<60 {
            try Self.useHeavily(store, round: round)
            if round % 10 == 9 { store.waitForBackgroundCompaction() }
            if let error = store.backgroundCompactionError { failures.append("round \(round): \(error)") }
        }
        store.waitForBackgroundCompaction()
        #expect(failures.isEmpty, "\(failures.count) failed, the first: \(failures.first ?? "")")
        #expect(store.backgroundCompactions >= 2)
        let inUse = try StoreDigest.of(store)
        #expect(inUse == digest, "the store in use: \(Self.difference(inUse, digest))")
        try store.close()
        // Compacted round after round: far fewer dead bytes than the same use never compacted.
        let compacted = try StepLogStore.open(work, options: .fullReplayReadOnly).figures()
        let never = try StepLogStore.open(expected, options: .fullReplayReadOnly).figures()
        #expect(compacted.liveBytes == never.liveBytes)
        #expect(compacted.deadBytes * 3 < never.deadBytes, "dead bytes: \(compacted.deadBytes) compacted, \(never.deadBytes) never compacted")
        try verify(work)
        let replayed = try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly))
        #expect(replayed == digest, "reopened by replay: \(Self.difference(replayed, digest))")
        let fromSnapshots = try StepLogStore.open(work, options: quiet)
        #expect(try StoreDigest.of(fromSnapshots) == digest, "reopened from snapshots")
        try fromSnapshots.close()
    }

    /// The reservation's bound holds for outputs of any record size, from
    /// small records to ones larger than a segment, and records a little over
    /// half a segment's capacity need about twice the outputs their bytes
    /// would fill: a bound of the bytes over the capacity would not hold.
    @Test func theReservedOutputsHoldEveryRecordSize() throws {
        let tmp = TemporaryDirectory()
        for segmentSize in [8 << 10, 64 << 10] {
            let capacity = segmentSize - FormatConstants.dataStartV2
            let sizes = [FormatConstants.recordHeaderSize, 17, 100, capacity / 3, capacity / 2, capacity / 2 + 1, capacity / 2 + 9,
                         capacity - 1, capacity, capacity + 100, 3 * capacity]
            for size in sizes {
                for count in [0, 1, 2, 3, 10, 41] {
                    let dir = tmp.sub("out-\(segmentSize)-\(size)-\(count)")
                    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
                    let bound = CompactionOutput.bound(recordBytes: Int64(size * count), segmentSize: segmentSize)
                    let output = try CompactionOutput(directory: dir, firstSequence: 2, basePosition: 1 << 20, compactedThrough: 1,
                                                      segmentSize: segmentSize, writeSnapshots: false,
                                                      reserved: (1 + bound.segments, (1 << 20) + bound.bytes), onSegmentWritten: { _ in })
                    let frame = WriteBuffer(capacity: size)
                    LogRecord.padding(length: size - FormatConstants.recordHeaderSize).append(to: frame)
                    for _ in 0..<count { try output.append(frame.bytes) }
                    let outputs = try output.finish()
                    let bytes = outputs.reduce(Int64(0)) { $0 + $1.size }
                    #expect(UInt64(outputs.count) <= bound.segments && UInt64(bytes) <= bound.bytes,
                            "\(count) records of \(size) bytes, segments of \(segmentSize): \(outputs.count) outputs, \(bytes) bytes; reserved \(bound)")
                    if size == capacity / 2 + 1 && count == 41 {
                        #expect(outputs.count > (size * count + capacity - 1) / capacity + 2)
                    }
                }
            }
        }
    }

    @Test func aRequestFileAsksTheWriterToCompactAndIsAnswered() throws {
        let tmp = TemporaryDirectory()
        let work = tmp.sub("work")
        try history(work)
        let expected = try expected(work, rounds: 0, in: tmp.sub("expected"))
        let store = try StepLogStore.open(work, options: options)
        #expect(FileManager.default.createFile(atPath: work + "/" + StepLogStore.compactionRequestFileName, contents: Data()))
        try store.sync() // the writer looks at its next sync
        store.waitForBackgroundCompaction()
        let answer = try String(contentsOfFile: work + "/" + StepLogStore.compactionResultFileName, encoding: .utf8)
        #expect(answer.hasPrefix("ok "), "\(answer)")
        #expect(!FileManager.default.fileExists(atPath: work + "/" + StepLogStore.compactionRequestFileName))
        #expect(store.backgroundCompactions == 1)
        #expect(try StoreDigest.of(store) == expected)
        try store.close()
    }

    /// A writer that does nothing at all (no upsert, no sync: an idle
    /// stepsync) still takes a request within about a second and answers it;
    /// the request file goes when it is taken. Reopened by replay, the store
    /// holds what it held.
    @Test func anIdleWriterAnswersARequest() throws {
        let tmp = TemporaryDirectory()
        let work = tmp.sub("work")
        try history(work)
        let expected = try expected(work, rounds: 0, in: tmp.sub("expected"))
        let store = try StepLogStore.open(work, options: options)
        let bytesBefore = store.counts.bytes
        let request = work + "/" + StepLogStore.compactionRequestFileName, result = work + "/" + StepLogStore.compactionResultFileName
        #expect(FileManager.default.createFile(atPath: request, contents: Data()))
        let asked = Date()
        var answer: String?
        while answer == nil && Date().timeIntervalSince(asked) < 20 {
            answer = try? String(contentsOfFile: result, encoding: .utf8)
            if answer == nil { usleep(20_000) }
        }
        let waited = Date().timeIntervalSince(asked)
        #expect(answer?.hasPrefix("ok ") == true, "no answer after \(waited) s: \(String(describing: answer))")
        #expect(!FileManager.default.fileExists(atPath: request))
        store.waitForBackgroundCompaction()
        #expect(store.backgroundCompactions == 1)
        #expect(store.counts.bytes < bytesBefore)
        #expect(try StoreDigest.of(store) == expected)
        try store.close()
        try verify(work)
        #expect(try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly)) == expected, "reopened by replay")
    }
}
