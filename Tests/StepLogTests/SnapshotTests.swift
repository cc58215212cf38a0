import Foundation
import Testing
@testable import StepLog

/// Index snapshots: written for sealed segments, the same state as a full
/// replay, ignored (and the segment replayed) when damaged or stale.
@Suite struct SnapshotTests {
    func history(_ dir: String) throws -> StoreDigest {
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 120, seed: 11)
        return try StoreDigest.of(try StepLogStore.open(dir, options: .fullReplayReadOnly))
    }

    func hints(_ dir: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".hint") }.sorted()
    }

    @Test func sealedSegmentsGetSnapshotsAndOpeningFromThemGivesTheSameState() throws {
        let tmp = TemporaryDirectory()
        let expected = try history(tmp.path)
        let sealed = segmentFiles(tmp.path).count - 1
        #expect(sealed >= 4)
        #expect(hints(tmp.path).count == sealed)
        let store = try StepLogStore.open(tmp.path)
        #expect(store.openReport.segmentsFromSnapshots == sealed)
        #expect(store.openReport.snapshotsIgnored.isEmpty)
        #expect(try StoreDigest.of(store) == expected)
        #expect(store.counts.unsyncedSamples == (try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)).counts.unsyncedSamples)
        // Writing continues on top of a snapshot-opened store.
        try store.upsert([makeSample(77_777)], fetchedAt: Date())
        try store.close()
        #expect(try StepLogStore.open(tmp.path).sample(id: .test(77_777)) != nil)
    }

    @Test func snapshotsAppliedBandByBandGiveTheSameStateAsReplay() throws {
        // Opening applies a run of snapshots band by band of the index's hash
        // range. Tiny bands (a few slots, so probes run across band edges)
        // and one band for everything must all equal a full replay.
        let tmp = TemporaryDirectory()
        let expected = try history(tmp.path)
        let unsynced = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly).counts.unsyncedSamples
        // Each also on two threads (each half of the hash range in a lane of
        // the index; what a lane refuses, the opening thread applies after:
        // TagCollisionTests makes lanes refuse).
        for bandBytes in [44, 1 << 10, 8 << 10, 1 << 30] {
            for twoThreads in [false, true] {
                var options = StoreOptions(readOnly: true)
                options.snapshotBandBytes = bandBytes
                options.snapshotParallelEntries = twoThreads ? 0 : .max
                let store = try StepLogStore.open(tmp.path, options: options)
                let label = "bands of \(bandBytes) bytes, \(twoThreads ? "two threads" : "one thread")"
                #expect(store.openReport.segmentsFromSnapshots == segmentFiles(tmp.path).count - 1)
                #expect(try StoreDigest.of(store) == expected, "\(label)")
                #expect(store.counts.unsyncedSamples == unsynced, "\(label)")
                // Two threads need two bands a half (one is left to the opening thread).
                let parallel = twoThreads && store.state.index.memoryBytes / bandBytes >= 4
                #expect((store.openReport.snapshotEntriesInParallel > 0) == parallel, "\(label)")
            }
        }
    }

    @Test func snapshotEntriesOutOfHashOrderFailTheParallelOpenInOneLine() throws {
        // Two threads start each half of a snapshot where its hash range
        // starts; entries out of order (a file this engine did not write,
        // with a good checksum) would be applied twice or not at all, so
        // opening names the file instead.
        let tmp = TemporaryDirectory()
        _ = try history(tmp.path)
        let segment = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly).segmentInfos[0]
        var snapshot = try SegmentSnapshot.load(for: segment, directory: tmp.path).get()
        #expect(snapshot.samples.count > 8)
        snapshot.samples.insert(snapshot.samples.removeLast(), at: 0)
        let name = SegmentName.snapshotFileName(sequence: segment.sequence)
        writeFile(tmp.sub(name), snapshot.encoded())
        var options = StoreOptions(readOnly: true)
        options.snapshotBandBytes = 44
        options.snapshotParallelEntries = 0
        #expect {
            try StepLogStore.open(tmp.path, options: options)
        } throws: { error in
            "\(error)".contains(name) && "\(error)".contains("not in hash order") && !"\(error)".contains("\n")
        }
    }

    @Test func hashOrderSortsByHashThenUUID() {
        var rng = SeededGenerator(seed: 21)
        for n in [0, 1, 2, 3, 100, 5_000, 70_000] {
            let entries = (0..<n).map { i in
                SegmentSnapshot.SampleEntry(uuid: UUIDBytes(high: rng.next(), low: rng.next() | 1), offset: UInt32(i), flags: 1)
            }
            let expected = entries.indices.sorted { a, b in
                let (x, y) = (entries[a].uuid, entries[b].uuid)
                return (x.mixedHash, x.high, x.low) < (y.mixedHash, y.high, y.low)
            }.map { UInt32($0) }
            #expect(SegmentSnapshot.hashOrder(entries) == expected, "\(n) entries")
        }
    }

    @Test func bucketOrderKeepsTheEventsOfOneSampleInLogOrder() {
        // A snapshot build collapses each sample's events in log order, so the
        // sort must be stable: many events of few samples, in one bucket or many.
        var rng = SeededGenerator(seed: 22)
        for distinct in [1, 3, 50] {
            let pool = (0..<distinct).map { _ in UUIDBytes(high: rng.next(), low: rng.next() | 1) }
            let uuids = (0..<2_000).map { _ in pool[Int(rng.next() % UInt64(distinct))] }
            let hashes = uuids.map(\.mixedHash)
            let expected = uuids.indices.sorted { a, b in
                let (x, y) = (uuids[a], uuids[b])
                return (x.mixedHash, x.high, x.low, a) < (y.mixedHash, y.high, y.low, b)
            }.map { UInt32($0) }
            #expect(SegmentSnapshot.bucketOrder(hashes: hashes, uuids: uuids) == expected, "\(distinct) distinct samples")
        }
    }

    @Test func snapshotsRoundTripAndMatchAFreshBuild() throws {
        let tmp = TemporaryDirectory()
        _ = try history(tmp.path)
        let store = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)
        let records = try readAllRecords(tmp.path)
        for (i, segment) in store.segmentInfos.dropLast().enumerated() {
            // The index's size after this segment: live samples and pending deletions.
            var model = RecordModel()
            for r in records where r.segmentIndex <= i { model.apply(r.record) }
            let built = try SegmentSnapshot.build(from: segment, keysAfter: model.samples.count)
            let bytes = built.encoded()
            #expect(try bytes.withUnsafeBytes { try SegmentSnapshot.decode($0).get() } == built)
            #expect(try SegmentSnapshot.load(for: segment, directory: tmp.path).get() == built, "snapshot of segment \(i) (keysAfter included)")
        }
    }

    @Test func aVersionThreeSnapshotByteForByte() throws {
        // docs/IMPL.md's example, against an independent encoder (CRC-32C bit
        // by bit in Python): two entries, a version of origin export (flags
        // 0x41) and a synced version of origin live (0x63), and one other record.
        let snapshot = SegmentSnapshot(
            sequence: 1, basePosition: 0, segmentSize: 8192, tailChecksum: 0x1234_5678, keysAfter: 2,
            samples: [.init(uuid: UUIDBytes(GoldenExample.sample.id), offset: 4096, flags: 0x41),
                      .init(uuid: UUIDBytes(UUID(uuidString: "00000000-0000-4000-8000-000000000001")!), offset: 4300, flags: 0x63)],
            others: [.init(offset: 4400, type: 6, payload: Array("abc".utf8))])
        let bytes = snapshot.encoded()
        #expect(GoldenExample.hex(bytes.prefix(FormatConstants.snapshotHeaderSize)) == "5354455048494e54" + "0300" + "0000"
                + "0100000000000000" + "0000000000000000" + "0020000000000000" + "78563412" + "0200000000000000"
                + "0200000000000000" + "0100000000000000" + "41b9c7fd" + "1db6e437")
        #expect(GoldenExample.hex(bytes.dropFirst(FormatConstants.snapshotHeaderSize)) == "6f9619ff8b86d011b42d00c04fc964ff" + "00100000" + "41"
                + "00000000000040008000000000000001" + "cc100000" + "63" + "30110000" + "06" + "03000000" + "616263")
        #expect(snapshot.samples.map(\.origin) == [.export, .live])
        #expect(snapshot.samples.map(\.isSynced) == [false, true])
        #expect(try bytes.withUnsafeBytes { try SegmentSnapshot.decode($0).get() } == snapshot)
    }

    @Test func damagedTruncatedOrStaleSnapshotsAreIgnored() throws {
        let tmp = TemporaryDirectory()
        let expected = try history(tmp.path)
        let names = hints(tmp.path)
        // A flipped bit, a truncation, and a snapshot copied over another segment's.
        var flipped = readFile(tmp.sub(names[0]))
        flipped[flipped.count / 2] ^= 0x04
        writeFile(tmp.sub(names[0]), flipped)
        let truncated = readFile(tmp.sub(names[1]))
        writeFile(tmp.sub(names[1]), Array(truncated.prefix(truncated.count - 7)))
        writeFile(tmp.sub(names[2]), readFile(tmp.sub(names[3])))
        let store = try StepLogStore.open(tmp.path)
        #expect(store.openReport.snapshotsIgnored.count == 3)
        #expect(store.openReport.snapshotsIgnored.contains { $0.hasPrefix(names[0]) && $0.contains("checksum") })
        #expect(store.openReport.snapshotsIgnored.contains { $0.hasPrefix(names[2]) && $0.contains("segment") })
        #expect(try StoreDigest.of(store) == expected)
        // The writer rebuilds them.
        store.waitForSnapshots()
        try store.close()
        let again = try StepLogStore.open(tmp.path)
        #expect(again.openReport.snapshotsIgnored.isEmpty)
        #expect(again.openReport.segmentsFromSnapshots == names.count)
    }

    @Test func aDamagedRecordBehindAValidSnapshotIsNeverReturned() throws {
        let tmp = TemporaryDirectory()
        try writeKnownHistory(tmp.path, segmentSize: 16 << 10, batches: 60, seed: 12)
        let records = try readAllRecords(tmp.path)
        // A sample whose current version sits in the first segment.
        let store0 = try StepLogStore.open(tmp.path, options: .fullReplay)
        let victim = try #require(records.first { r in
            guard r.segmentIndex == 0, case .sampleUpsert(let s) = r.record else { return false }
            return (try? store0.sample(id: s.sample.id))??.position.rawValue == UInt64(r.offset)
        })
        try store0.close()
        let path = victim.segment
        var bytes = readFile(path)
        bytes[Int(victim.offset) + 30] ^= 0x01 // inside the payload, far from the tail
        writeFile(path, bytes)
        guard case .sampleUpsert(let s) = victim.record else { Issue.record("the victim is not a sample"); return }
        let store = try StepLogStore.open(tmp.path) // opens from the snapshot
        #expect(store.openReport.segmentsFromSnapshots > 0)
        #expect(throws: StepLogError.self) { _ = try store.sample(id: s.sample.id) }
        #expect(throws: StepLogError.self) { try store.forEachSample { _ in } }
        try store.close()
        #expect(throws: StepLogError.self) { _ = try StepLogStore.open(tmp.path, options: .fullReplay) }
    }
}
