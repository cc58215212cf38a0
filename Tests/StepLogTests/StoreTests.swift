import Foundation
import Testing
@testable import StepLog

@Suite struct StoreRoundTripTests {
    @Test func upsertSyncReopenGivesTheSameStore() throws {
        let dir = TemporaryDirectory()
        let samples = (0..<2_000).map { makeSample($0, count: Int($0 % 500)) }
        let before: StoreDigest
        do {
            let store = try StepLogStore.open(dir.path)
            let summary = try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: 1))
            #expect(summary == UpsertSummary(inserted: 2_000))
            try store.recordIntervals([SyncInterval(id: .test(1), startMilliseconds: 0, endMilliseconds: 10, stepCount: 5, status: .pending)])
            try store.recordHighScore(DailyHighScore(day: 20261121, steps: 10, recordedAtMilliseconds: 3))
            try store.sync()
            before = try StoreDigest.of(store)
            try store.close()
        }
        let reopened = try StepLogStore.open(dir.path)
        #expect(try StoreDigest.of(reopened) == before)
        #expect(reopened.counts.samples == 2_000)
        #expect(reopened.counts.unsyncedSamples == 2_000)
        #expect(reopened.openReport.tornTail == nil)
        #expect(try reopened.sample(id: samples[1234].id)?.sample == samples[1234])
        #expect(try reopened.sample(id: .test(99_999)) == nil)
    }

    @Test func segmentsRollAtTheConfiguredSizeAndReplayInOrder() throws {
        let dir = TemporaryDirectory()
        let options = StoreOptions(segmentSize: 8_192)
        var digest: StoreDigest
        do {
            let store = try StepLogStore.open(dir.path, options: options)
            for batch in 0..<50 {
                try store.upsert((0..<20).map { makeSample(UInt64(batch * 20 + $0)) }, fetchedAt: Date())
                // Changed versions of earlier samples, so later segments override earlier ones.
                try store.upsert([makeSample(UInt64(batch), count: 1000 + batch)], fetchedAt: Date())
                try store.sync()
            }
            digest = try StoreDigest.of(store)
            try store.close()
        }
        let files = segmentFiles(dir.path)
        #expect(files.count > 10)
        for file in files.dropLast() {
            // Full to within a record and its synced-through record, or a sector's padding.
            let size = readFile(file).count
            #expect(size <= 8_192 && size > 8_192 - 600, "\(file) has \(size) bytes")
        }
        let reopened = try StepLogStore.open(dir.path, options: options)
        #expect(try StoreDigest.of(reopened) == digest)
        #expect(reopened.counts.samples == 1_000)
        #expect(try reopened.sample(id: .test(7))?.sample.count == 1007)
        // Segments are contiguous in log positions.
        let infos = reopened.segmentInfos
        for (a, b) in zip(infos, infos.dropFirst()) { #expect(a.endPosition == b.basePosition) }
    }
}

@Suite struct UpsertSemanticsTests {
    @Test func identicalWritesNothingAndKeepsSyncedState() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let s = makeSample(1)
        #expect(try store.upsert([s], fetchedAt: Date(timeIntervalSince1970: 1)) == UpsertSummary(inserted: 1))
        let batch = try store.unsyncedSamples(limit: 10)
        #expect(try store.markSynced(batch) == 1)
        let bytes = store.counts.bytes
        // Same content, later fetchedAt: nothing written, still synced.
        #expect(try store.upsert([s], fetchedAt: Date(timeIntervalSince1970: 99)) == UpsertSummary(unchanged: 1))
        #expect(store.counts.bytes == bytes)
        #expect(try store.sample(id: s.id)?.isSynced == true)
        #expect(try store.sample(id: s.id)?.fetchedAtMilliseconds == 1_000)
        #expect(store.counts.unsyncedSamples == 0)
    }

    @Test func changedContentIsAppendedAndUnsyncedAgain() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let s = makeSample(1)
        try store.upsert([s], fetchedAt: Date())
        try store.markSynced(try store.unsyncedSamples(limit: 10))
        for change in [
            { (x: inout StepSample) in x.count += 1 },
            { (x: inout StepSample) in x.endMilliseconds += 1 },
            { (x: inout StepSample) in x.startMilliseconds -= 1 },
            { (x: inout StepSample) in x.sourceBundleId += "x" },
            { (x: inout StepSample) in x.sourceDeviceName = nil },
            { (x: inout StepSample) in x.sourceDeviceName = "" },
        ] {
            var changed = try #require(try store.sample(id: s.id)).sample
            change(&changed)
            #expect(try store.upsert([changed], fetchedAt: Date()) == UpsertSummary(updated: 1))
            let stored = try #require(try store.sample(id: s.id))
            #expect(stored.sample == changed)
            #expect(!stored.isSynced)
            #expect(store.counts.unsyncedSamples == 1)
            try store.markSynced([stored])
            #expect(store.counts.unsyncedSamples == 0)
        }
        #expect(store.counts.samples == 1)
    }

    @Test func duplicatesInsideOneBatch() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        var b = makeSample(1)
        b.count = 7
        let summary = try store.upsert([makeSample(1), makeSample(1), b], fetchedAt: Date())
        #expect(summary == UpsertSummary(inserted: 1, updated: 1, unchanged: 1))
        #expect(try store.sample(id: b.id)?.sample.count == 7)
    }

    @Test func anInvalidSampleRejectsTheWholeBatch() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        var bad = makeSample(2)
        bad.endMilliseconds = bad.startMilliseconds - 1
        #expect(throws: StepLogError.invalidSample(id: bad.id.uuidString, reason: "endDate is before startDate")) {
            try store.upsert([makeSample(1), bad], fetchedAt: Date())
        }
        #expect(store.counts.samples == 0)
        var nilID = makeSample(3)
        nilID.id = UUID.nil
        #expect(throws: StepLogError.self) { try store.upsert([nilID], fetchedAt: Date()) }
        var negative = makeSample(4)
        negative.count = -1
        #expect(throws: StepLogError.self) { try store.upsert([negative], fetchedAt: Date()) }
        #expect(store.counts.samples == 0)
    }
}

@Suite struct UnsyncedIterationTests {
    @Test func batchesComeInWriteOrderAndShrinkAsTheyAreMarked() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path, options: StoreOptions(segmentSize: 8_192))
        try store.upsert((0..<2_500).map { makeSample($0) }, fetchedAt: Date())
        var seen: [UUID] = []
        while true {
            let batch = try store.unsyncedSamples(limit: 1_000)
            if batch.isEmpty { break }
            // Asking again before marking returns the same batch.
            #expect(try store.unsyncedSamples(limit: 1_000).map(\.id) == batch.map(\.id))
            #expect(try store.markSynced(batch) == batch.count)
            seen += batch.map(\.id)
        }
        #expect(seen == (0..<2_500).map { UUID.test($0) })
        #expect(store.counts.unsyncedSamples == 0)
        // A changed sample comes back, alone.
        var changed = makeSample(1_234)
        changed.count = 1
        try store.upsert([changed], fetchedAt: Date())
        #expect(try store.unsyncedSamples(limit: 1_000).map(\.sample) == [changed])
    }

    @Test func aVersionChangedAfterReadingIsNotMarked() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        try store.upsert([makeSample(1), makeSample(2)], fetchedAt: Date())
        let batch = try store.unsyncedSamples(limit: 10)
        var changed = makeSample(1)
        changed.count = 999
        try store.upsert([changed], fetchedAt: Date())
        #expect(try store.markSynced(batch) == 1) // only sample 2
        #expect(try store.unsyncedSamples(limit: 10).map(\.sample) == [changed])
    }

    @Test func readingAheadWithAfter() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        try store.upsert((0..<10).map { makeSample($0) }, fetchedAt: Date())
        let first = try store.unsyncedSamples(limit: 4)
        let second = try store.unsyncedSamples(limit: 4, after: first.last!.position)
        #expect(second.map(\.id) == (4..<8).map { UUID.test($0) })
    }

    @Test func syncedStateSurvivesReopen() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try StepLogStore.open(dir.path)
            try store.upsert((0..<100).map { makeSample($0) }, fetchedAt: Date())
            try store.markSynced(try store.unsyncedSamples(limit: 60))
            try store.close()
        }
        let store = try StepLogStore.open(dir.path)
        #expect(store.counts.unsyncedSamples == 40)
        #expect(try store.unsyncedSamples(limit: 100).map(\.id) == (60..<100).map { UUID.test($0) })
    }
}

@Suite struct StoreLifecycleTests {
    @Test func aSecondWriterIsRefusedWithTheOwnersPid() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        #expect(throws: StepLogError.locked(path: dir.path + "/LOCK", pid: getpid())) {
            _ = try StepLogStore.open(dir.path)
        }
        #expect(StepLogError.locked(path: "x/LOCK", pid: 12).description.hasPrefix("store is locked by pid 12"))
        try store.close()
        _ = try StepLogStore.open(dir.path) // free again
    }

    @Test func aRefusedOpenClosesOnlyItsOwnDescriptor() throws {
        // A refused open used to close its LOCK descriptor twice; the second
        // close hit whatever file another thread had opened in between.
        // Another thread opens, reads and closes a file in a loop meanwhile:
        // every read must succeed.
        let dir = TemporaryDirectory()
        let holder = try StepLogStore.open(dir.path)
        let probe = dir.path + "/probe"
        writeFile(probe, Array(repeating: 7, count: 64))
        let flags = ReaderFlags()
        let finished = DispatchGroup()
        DispatchQueue.global().async(group: finished) {
            var byte: UInt8 = 0
            while !flags.stopped {
                let fd = open(probe, O_RDONLY | O_CLOEXEC)
                if fd < 0 || pread(fd, &byte, 1, 0) != 1 { flags.failed() }
                if fd >= 0 { close(fd) }
            }
        }
        for _ in 0..<3_000 {
            #expect(throws: StepLogError.self) { _ = try StepLogStore.open(dir.path) }
        }
        flags.stop()
        finished.wait()
        #expect(flags.failures == 0, "reads failed while opens were refused: \(flags.failures)")
        try holder.close()
    }

    @Test func aFailedWriteIsSticky() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        try store.upsert([makeSample(1)], fetchedAt: Date())
        try store.sync()
        // Swap the writer's descriptor for an invalid one: the next write fails (EBADF).
        let real = store.writer!.fd
        store.writer!.stopPreallocating()
        store.writer!.fd = FileDescriptor(rawValue: -1, path: real.path)
        real.close()
        try store.upsert([makeSample(2)], fetchedAt: Date())
        let first = #expect(throws: StepLogError.self) { try store.sync() }
        let second = #expect(throws: StepLogError.self) { try store.upsert([makeSample(3)], fetchedAt: Date()) }
        #expect(first == second)
        #expect(throws: StepLogError.self) { try store.recordHighScore(DailyHighScore(day: 1, steps: 1, recordedAtMilliseconds: 1)) }
        // Reopening recovers what was synced.
        store.writer = nil
        try? store.close()
        let reopened = try StepLogStore.open(dir.path)
        #expect(try reopened.sample(id: makeSample(1).id) != nil)
    }

    @Test func pathsThatAreNotStores() throws {
        let dir = TemporaryDirectory()
        writeFile(dir.sub("file"), [1, 2, 3])
        #expect(throws: StepLogError.notAStore(path: dir.sub("file"), reason: "it is a file, not a directory")) {
            _ = try StepLogStore.open(dir.sub("file"))
        }
        try FileManager.default.createDirectory(atPath: dir.sub("photos"), withIntermediateDirectories: false)
        writeFile(dir.sub("photos/cat.jpg"), [1])
        #expect(throws: StepLogError.self) { _ = try StepLogStore.open(dir.sub("photos")) }
        var readOnly = StoreOptions()
        readOnly.readOnly = true
        #expect(throws: StepLogError.notAStore(path: dir.sub("missing"), reason: "no such directory")) {
            _ = try StepLogStore.open(dir.sub("missing"), options: readOnly)
        }
    }

    @Test func readOnlyStoresRefuseWrites() throws {
        let dir = TemporaryDirectory()
        do {
            let store = try StepLogStore.open(dir.path)
            try store.upsert([makeSample(1)], fetchedAt: Date())
            try store.close()
        }
        var options = StoreOptions()
        options.readOnly = true
        let a = try StepLogStore.open(dir.path, options: options)
        let b = try StepLogStore.open(dir.path, options: options) // readers share
        #expect(a.counts.samples == 1 && b.counts.samples == 1)
        #expect(throws: StepLogError.readOnly(path: dir.path)) { try a.upsert([makeSample(2)], fetchedAt: Date()) }
        // Readers take no lock: a writer can open beside them, and a reader opened
        // later sees what the writer synced.
        let writer = try StepLogStore.open(dir.path)
        try writer.upsert([makeSample(2)], fetchedAt: Date())
        try writer.sync()
        #expect(try StepLogStore.open(dir.path, options: options).counts.samples == 2)
    }

    @Test func intervalsOfOneRangeAreListedByIdByEveryOpen() throws {
        // Two ids for the same range were listed in the dictionary's order, which
        // differed between a read-only and a writer's open (found by fuzzing store-open).
        let dir = TemporaryDirectory()
        let ids = (1...50).map { UUID.test(UInt64($0 * 7919)) }
        let byId = ids.sorted { (UUIDBytes($0).high, UUIDBytes($0).low) < (UUIDBytes($1).high, UUIDBytes($1).low) }
        do {
            let store = try StepLogStore.open(dir.path)
            try store.recordIntervals(ids.reversed().map {
                SyncInterval(id: $0, startMilliseconds: 0, endMilliseconds: 86_400_000, stepCount: 1234, status: .pending)
            })
            try store.recordIntervals([SyncInterval(id: .test(1), startMilliseconds: -5, endMilliseconds: 0, stepCount: 0, status: .empty)])
            #expect(store.intervals().map(\.id) == [.test(1)] + byId)
        }
        var readOnly = StoreOptions(readOnly: true)
        readOnly.useSnapshots = false
        #expect(try StepLogStore.open(dir.path, options: readOnly).intervals().map(\.id) == [.test(1)] + byId)
        #expect(try StepLogStore.open(dir.path).intervals().map(\.id) == [.test(1)] + byId)
    }

    @Test func intervalsClearAndRanges() throws {
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let a = SyncInterval(id: .test(1), startMilliseconds: 0, endMilliseconds: 10, stepCount: 5, status: .pending)
        var b = SyncInterval(id: .test(2), startMilliseconds: 10, endMilliseconds: 20, stepCount: 0, status: .empty)
        try store.recordLayeringRange(LayeringRange(startMilliseconds: 0, endMilliseconds: 20))
        try store.recordIntervals([b, a])
        #expect(store.intervals().map(\.id) == [a.id, b.id])
        b.status = .fetched
        try store.recordIntervals([b])
        #expect(store.counts.intervals[.empty] == 0 && store.counts.intervals[.fetched] == 1)
        #expect(store.intervals(status: .pending) == [a])
        try store.clearIntervals()
        #expect(store.intervals().isEmpty && store.layeringRanges.isEmpty)
        try store.close()
        let reopened = try StepLogStore.open(dir.path)
        #expect(reopened.intervals().isEmpty && reopened.counts.intervalTotal == 0)
    }
}

/// Shared between a test and the reader thread it starts.
private final class ReaderFlags: @unchecked Sendable {
    private let lock = NSLock()
    private var stopRequested = false
    private var failureCount = 0
    var stopped: Bool { lock.withLock { stopRequested } }
    var failures: Int { lock.withLock { failureCount } }
    func stop() { lock.withLock { stopRequested = true } }
    func failed() { lock.withLock { failureCount += 1 } }
}

/// Version 2's header fields that no writer uses yet but every reader must
/// already honour: the range end in the chain check, and the index's 46-bit
/// position limit.
@Suite struct SegmentChainTests {
    func info(_ sequence: UInt64, base: UInt64, size: Int64, rangeEnd: UInt64 = 0) -> SegmentInfo {
        SegmentInfo(header: SegmentHeader(sequence: sequence, basePosition: base, rangeEnd: rangeEnd),
                    path: "/s/\(SegmentName.fileName(sequence: sequence))", size: size)
    }

    @Test func aReservedRangeEndIsWhereTheNextSegmentStarts() {
        // Exact tiling, as written today.
        #expect(SegmentSet.firstBreak(in: [info(1, base: 0, size: 5_000), info(2, base: 5_000, size: 4_096)], directory: "/s") == nil)
        // A reserved range: the next starts at its end, past the first's data.
        #expect(SegmentSet.firstBreak(in: [info(1, base: 0, size: 5_000, rangeEnd: 9_000), info(2, base: 9_000, size: 4_096)], directory: "/s") == nil)
        // Anywhere else is a break, and so is a segment that outgrew its range.
        let gap = SegmentSet.firstBreak(in: [info(1, base: 0, size: 5_000, rangeEnd: 9_000), info(2, base: 5_000, size: 4_096)], directory: "/s")
        #expect(gap?.index == 1 && gap?.problem == .reservedRangeMismatch(rangeEnd: 9_000, next: 5_000))
        #expect(gap?.problem.description == "segment reserved positions up to 9000 but the next starts at 5000")
        let outgrown = SegmentSet.firstBreak(in: [info(1, base: 0, size: 9_500, rangeEnd: 9_000), info(2, base: 9_000, size: 4_096)], directory: "/s")
        #expect(outgrown?.problem == .pastReservedRange(end: 9_500, rangeEnd: 9_000))
        #expect(outgrown?.problem.description == "segment ends at position 9500, past the end of its reserved range (9000)")
    }

    @Test func positionsPastTheIndexsFortySixBitsAreRefused() throws {
        let tmp = TemporaryDirectory()
        let path = tmp.sub(SegmentName.fileName(sequence: 1))
        writeFile(path, SegmentHeader(sequence: 1, basePosition: (1 << 46) - 4_000).encodedBlock())
        #expect(throws: StepLogError.corruption(path: path, offset: 20, kind: .segmentHeader(.positionsBeyondIndex))) {
            _ = try StepLogStore.open(tmp.path)
        }
        writeFile(path, SegmentHeader(sequence: 1, basePosition: (1 << 46) - 5_000).encodedBlock())
        let store = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(store.counts.samples == 0)
    }
}
