import Foundation
import Testing
@testable import StepLog

/// The store's counts of live samples by origin, which the index keeps (an
/// entry's origin bits, carried by index snapshots), equal a recount of the
/// live samples' current versions however the store was opened. (Every
/// `StoreDigest` also compares them: the replay, crash-cut and snapshot
/// tests check them too.)
@Suite struct OriginCountsTests {
    static func recount(_ store: StepLogStore) throws -> SampleOriginCounts {
        var counts = SampleOriginCounts()
        try store.forEachSample { counts[$0.sample.origin] += 1 }
        return counts
    }

    /// Opened from its snapshots (on one thread and on two) and by full
    /// replay, the store counts what a recount finds.
    static func expectCountsHoweverOpened(_ dir: String, _ expected: SampleOriginCounts, _ label: String) throws {
        let replayed = try StepLogStore.open(dir, options: .fullReplayReadOnly)
        #expect(replayed.samplesByOrigin == expected, "\(label), full replay")
        for twoThreads in [false, true] {
            var options = StoreOptions(readOnly: true)
            options.snapshotBandBytes = 1 << 10
            options.snapshotParallelEntries = twoThreads ? 0 : .max
            let store = try StepLogStore.open(dir, options: options)
            #expect(store.openReport.segmentsFromSnapshots > 0 && store.openReport.snapshotsIgnored.isEmpty, "\(label)")
            #expect(store.samplesByOrigin == expected, "\(label), from snapshots on \(twoThreads ? "two threads" : "one thread")")
        }
    }

    @Test func countsEqualARecountAfterInsertsRelabelsReplacementsDeletionsAndForgets() throws {
        let tmp = TemporaryDirectory()
        // Inserts, relabels (origin changes), changed versions, deletions,
        // revivals, acknowledgements and their withdrawal, in small segments.
        try writeKnownHistory(tmp.path, segmentSize: 16 << 10, batches: 150, seed: 31)
        let options = StoreOptions(segmentSize: 16 << 10)
        var expected = try Self.recount(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly))
        #expect(SampleOrigin.allCases.allSatisfy { expected[$0] > 0 }, "the history labels samples with every origin: \(expected)")
        try Self.expectCountsHoweverOpened(tmp.path, expected, "after the history")

        // Labeled samples of every origin beside them, then every `.mock` one forgotten
        // (`stepsync forget --source mock`), its deletions acknowledged.
        do {
            let store = try StepLogStore.open(tmp.path, options: options)
            let labeled = (0..<400).map { makeSample(50_000 + UInt64($0), origin: SampleOrigin(rawValue: UInt8($0 % 4))!) }
            try store.upsert(labeled, fetchedAt: Date())
            #expect(store.samplesByOrigin == (try Self.recount(store)))
            var mock: [UUID] = []
            try store.forEachSample { if $0.sample.origin == .mock { mock.append($0.id) } }
            #expect(try store.delete(mock, at: Date()).deleted == mock.count)
            #expect(store.samplesByOrigin[.mock] == 0)
            _ = try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: .max))
            expected = try Self.recount(store)
            #expect(store.samplesByOrigin == expected && expected[.mock] == 0)
            store.waitForSnapshots()
            try store.close()
        }
        try Self.expectCountsHoweverOpened(tmp.path, expected, "after the forget")

        // Compaction rewrites every live version (and their snapshots).
        _ = try StepLogStore.compact(directory: tmp.path, options: options)
        do {
            let store = try StepLogStore.open(tmp.path, options: options)
            #expect(store.samplesByOrigin == expected)
            store.waitForSnapshots()
            try store.close()
        }
        try Self.expectCountsHoweverOpened(tmp.path, expected, "after compaction")
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aVersionTwoSnapshotIsIgnoredNeverMisread() throws {
        // A version 2 snapshot has no origin bits in its entries: read as
        // version 3, every sample would count as unspecified. It is ignored
        // (the segment replayed), and a writer rebuilds it.
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path, options: StoreOptions(segmentSize: 16 << 10))
        for batch in 0..<40 {
            try store.upsert((0..<20).map { i in makeSample(UInt64(batch * 20 + i), origin: i % 2 == 0 ? .export : .mock) },
                             fetchedAt: Date())
        }
        let expected = try Self.recount(store)
        #expect(expected[.export] == 400 && expected[.mock] == 400)
        store.waitForSnapshots()
        try store.close()
        let sealed = try StepLogStore.open(tmp.path, options: .fullReplayReadOnly).segmentInfos.dropLast()
        #expect(sealed.count >= 3)
        for segment in sealed {
            var bytes = try SegmentSnapshot.build(from: segment, keysAfter: 0).encoded()
            for entry in 0..<((bytes.count - FormatConstants.snapshotHeaderSize) / FormatConstants.snapshotEntrySize) {
                bytes[FormatConstants.snapshotHeaderSize + entry * FormatConstants.snapshotEntrySize + 20] &= ~FormatConstants.snapshotEntryOriginMask
            }
            bytes[8] = 2
            let crc = CRC32C.mask(CRC32C.checksum(Array(bytes[0..<68])))
            withUnsafeBytes(of: crc.littleEndian) { bytes.replaceSubrange(68..<72, with: $0) }
            writeFile(tmp.sub(SegmentName.snapshotFileName(sequence: segment.sequence)), bytes)
        }
        let reader = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(reader.openReport.segmentsFromSnapshots == 0)
        #expect(reader.openReport.snapshotsIgnored.count == sealed.count)
        #expect(reader.openReport.snapshotsIgnored.allSatisfy { $0.contains("snapshot version 2 is not supported") })
        #expect(reader.samplesByOrigin == expected)
        #expect(try StoreVerifier.verify(directory: tmp.path).notes.contains { $0.contains("is a version 2 snapshot") })

        let writer = try StepLogStore.open(tmp.path, options: StoreOptions(segmentSize: 16 << 10))
        #expect(writer.samplesByOrigin == expected)
        writer.waitForSnapshots()
        try writer.close()
        try Self.expectCountsHoweverOpened(tmp.path, expected, "after a writer rebuilt the snapshots")
    }
}
