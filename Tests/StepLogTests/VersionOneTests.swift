import Foundation
import Testing
@testable import StepLog

/// Stores written by format version 1 open, read the same, take writes (in a
/// new version 2 segment: a writer never appends to a version 1 one) and
/// compact into version 2.
@Suite struct VersionOneTests {
    /// A tiny version 1 writer: 40-byte headers, records right after them,
    /// segments rolled at `segmentSize` and tiling positions, version 1 record
    /// types only. Returns the records written, in order.
    @discardableResult
    static func writeVersionOneStore(_ dir: String, segmentSize: Int = 6_000, seed: UInt64 = 1,
                                     zeroFillTail: Int = 0, snapshotsOfVersion1: Bool = false) throws -> [LogRecord] {
        try Directory.create(dir)
        var rng = SeededGenerator(seed: seed)
        var records: [LogRecord] = []
        var live: [StepSample] = []
        for batch in 0..<60 {
            for i in 0..<4 {
                let s = makeSample(UInt64(batch * 4 + i), count: Int.random(in: 0...500, using: &rng), device: i % 2 == 0 ? nil : "Watch")
                records.append(.sampleUpsert(SampleRecord(sample: s, fetchedAtMilliseconds: Int64(batch))))
                live.append(s)
            }
            if batch % 5 == 4, var s = live.randomElement(using: &rng) {
                s.count += 1
                records.append(.sampleUpsert(SampleRecord(sample: s, fetchedAtMilliseconds: Int64(batch))))
            }
            if batch % 3 == 0 {
                records.append(.samplesAcknowledged((0..<3).map { _ in live.randomElement(using: &rng)!.id }))
            }
            switch batch % 10 {
            case 1: records.append(.intervalStatus(SyncInterval(id: .test(9_000 + UInt64(batch % 4)), startMilliseconds: Int64(batch),
                                                                endMilliseconds: Int64(batch) + 1, stepCount: 5, status: .fetched)))
            case 2: records.append(.layeringRange(LayeringRange(startMilliseconds: Int64(batch), endMilliseconds: Int64(batch) + 9)))
            case 3: records.append(.dailyHighScore(DailyHighScore(day: 20_240_101, steps: Int64(batch), recordedAtMilliseconds: 1)))
            case 7 where batch == 27: records.append(.intervalsCleared(atMilliseconds: 3))
            default: break
            }
        }
        // Encode and cut into segments.
        var sequence: UInt64 = 1
        var base: UInt64 = 0
        var file = SegmentHeader(sequence: 1, basePosition: 0, version: 1).encoded()
        var files: [[UInt8]] = []
        for record in records {
            let bytes = GoldenExample.encoded(record)
            if file.count + bytes.count > segmentSize && file.count > 40 {
                files.append(file)
                base += UInt64(file.count)
                sequence += 1
                file = SegmentHeader(sequence: sequence, basePosition: base, version: 1).encoded()
            }
            file += bytes
        }
        files.append(file + [UInt8](repeating: 0, count: zeroFillTail))
        for (i, bytes) in files.enumerated() {
            writeFile(dir + "/" + SegmentName.fileName(sequence: UInt64(i + 1)), bytes)
        }
        if snapshotsOfVersion1 {
            // Snapshot files as version 1 wrote them (same layout, version 1 in
            // the header): this build ignores them and rebuilds current ones.
            let store = try StepLogStore.open(dir, options: .fullReplayReadOnly)
            for segment in store.segmentInfos.dropLast() {
                var bytes = try SegmentSnapshot.build(from: segment, keysAfter: 0).encoded()
                bytes[8] = 1
                let crc = CRC32C.mask(CRC32C.checksum(Array(bytes[0..<68])))
                withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(68..<72, with: $0) }
                writeFile(dir + "/" + SegmentName.snapshotFileName(sequence: segment.sequence), bytes)
            }
        }
        return records
    }

    static func model(_ records: [LogRecord]) -> StoreDigest {
        var model = RecordModel()
        for r in records { model.apply(r) }
        return model.digest
    }

    @Test func aVersionOneStoreReadsTheSame() throws {
        let tmp = TemporaryDirectory()
        let records = try Self.writeVersionOneStore(tmp.path, zeroFillTail: 5_000, snapshotsOfVersion1: true)
        let files = segmentFiles(tmp.path)
        #expect(files.count >= 4)
        let bytes = files.map(readFile)
        let store = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(try StoreDigest.of(store) == Self.model(records))
        #expect(store.openReport.snapshotsIgnored.count == files.count - 1)
        #expect(store.openReport.snapshotsIgnored.allSatisfy { $0.contains("snapshot version 1 is not supported") })
        #expect(store.segmentInfos.allSatisfy { $0.header.version == 1 && $0.dataStart == 40 })
        #expect(segmentFiles(tmp.path).map(readFile) == bytes, "a read-only open writes nothing")
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aWriterContinuesInANewVersionTwoSegment() throws {
        let tmp = TemporaryDirectory()
        let records = try Self.writeVersionOneStore(tmp.path, zeroFillTail: 5_000)
        let v1Files = segmentFiles(tmp.path)
        let v1Bytes = v1Files.map(readFile)
        var expected = Self.model(records)
        do {
            let store = try StepLogStore.open(tmp.path)
            #expect(store.openReport.sealedOlderVersion == (v1Files.last! as NSString).lastPathComponent)
            #expect(try StoreDigest.of(store) == expected)
            let infos = store.segmentInfos
            #expect(infos.count == v1Files.count + 1)
            #expect(infos.last!.header.version == FormatConstants.formatVersion && infos.last!.basePosition == infos[infos.count - 2].endPosition)
            // Samples written by version 1 behave as any: changed, deleted, acknowledged.
            var changed = makeSample(5)
            changed.count = 12_345
            #expect(try store.upsert([changed, makeSample(100_000)], fetchedAt: Date()) == UpsertSummary(inserted: 1, updated: 1))
            #expect(try store.delete([.test(6)], at: Date(timeIntervalSince1970: 7)) == DeleteSummary(deleted: 1))
            try store.markSynced(try store.unsyncedSamples(limit: 1_000))
            expected = try StoreDigest.of(store)
            store.waitForSnapshots()
            try store.close()
        }
        // The version 1 segments are untouched but for the newest's zero-filled
        // space, trimmed when it was sealed.
        for (i, file) in v1Files.enumerated() {
            let bytes = readFile(file)
            #expect(bytes == (i == v1Files.count - 1 ? Array(v1Bytes[i].dropLast(5_000)) : v1Bytes[i]), "\(file)")
        }
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.openReport.sealedOlderVersion == nil)
        #expect(reopened.openReport.segmentsFromSnapshots == v1Files.count, "every version 1 segment now has a current snapshot")
        #expect(try StoreDigest.of(reopened) == expected)
        try reopened.close()
        #expect(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly).counts.samples == expected.samples.count)
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aVersionOneStoreCompactsIntoVersionTwo() throws {
        let tmp = TemporaryDirectory()
        let records = try Self.writeVersionOneStore(tmp.path)
        let expected = Self.model(records)
        let store = try compactedToCurrentFormat(tmp.path, options: StoreOptions(segmentSize: 6_000 + 4_096))
        #expect(try StoreDigest.of(store) == expected)
        try store.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aTornVersionOneTailKeepsVersionOnesRule() throws {
        // Version 1 has no synced-through records: a torn last record is
        // dropped; damage with a valid record after it is corruption.
        let tmp = TemporaryDirectory()
        let records = try Self.writeVersionOneStore(tmp.path)
        let newest = segmentFiles(tmp.path).last!
        let bytes = readFile(newest)
        writeFile(newest, Array(bytes.dropLast(3)))
        let store = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(store.openReport.tornTail != nil)
        #expect(try StoreDigest.of(store) == Self.model(Array(records.dropLast())))
        try store.close()
        let work = tmp.sub("damaged")
        try Self.writeVersionOneStore(work)
        let path = segmentFiles(work).last!
        var damaged = readFile(path)
        damaged[60] ^= 0x08 // inside the first record, with intact ones after it
        writeFile(path, damaged)
        #expect(throws: StepLogError.self) { _ = try StepLogStore.open(work, options: .fullReplay) }
    }
}
