import Foundation
import Testing
@testable import StepLog

/// Records and snapshots whose checksums match but which hold values no
/// writer writes — damaged past their checksum, or forged. Opening must give
/// one line or a correct store, never a trap. Each case was found by the
/// store-open or snapshot fuzz target (reproducers in Tests/Fuzz/corpus).
///
/// The nil UUID: upsert refuses it and the index cannot hold it ("the nil
/// UUID cannot be indexed" trapped), so a record or snapshot entry holding it
/// is corruption, named in one line.
@Suite struct ImpossibleValueTests {
    /// `frame` (an encoded record) with its payload's first 16 bytes zeroed, checksum recomputed.
    static func withNilUUID(_ frame: [UInt8]) -> [UInt8] {
        var payload = Array(frame[FormatConstants.recordHeaderSize...])
        for i in 0..<16 { payload[i] = 0 }
        return SegmentReaderTests.raw(type: frame[4], payload)
    }

    @Test func aSampleOrTombstoneHoldingTheNilUUIDFailsTheOpenInOneLine() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        try writeKnownHistory(reference, segmentSize: 16 << 10, batches: 30, seed: 7)
        let newest = (segmentFiles(reference).last! as NSString).lastPathComponent
        let original = readFile(reference + "/" + newest)
        try copyDirectory(reference, to: work)
        let cases: [([UInt8], RecordType, String)] = [
            (GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: makeSample(1), fetchedAtMilliseconds: 0))), .sampleUpsert,
             "sample-upsert record holds the nil UUID"),
            (GoldenExample.encoded(.sampleDeleted(id: .test(1), deletedAtMilliseconds: 0)), .sampleDeleted, "sample-deleted record holds the nil UUID"),
        ]
        for (frame, type, reason) in cases {
            writeFile(work + "/" + newest, original + Self.withNilUUID(frame))
            for options in [StoreOptions(), .fullReplay, StoreOptions(readOnly: true)] {
                let error = #expect(throws: StepLogError.self) { _ = try StepLogStore.open(work, options: options) }
                let expected = StepLogError.corruption(path: work + "/" + newest, offset: Int64(original.count), kind: .malformedRecord(.nilUUID(type)))
                #expect(error == expected)
                #expect(error?.description == "corruption in \(work)/\(newest) at offset \(original.count): \(reason)")
            }
            // A checksummed record is no torn tail: nothing was truncated.
            #expect(readFile(work + "/" + newest).count == original.count + frame.count)
        }
    }

    /// Opening a store whose first snapshot has entry 0 changed by `change`
    /// (checksums recomputed: the entry is all that is wrong) fails with one
    /// line naming the snapshot, the entry and `reason`; without snapshots the
    /// store opens, since the segments themselves are sound.
    func expectFirstSnapshotEntryRefused(_ change: (inout SegmentSnapshot.SampleEntry) -> Void, kind: StepLogError.CorruptionKind,
                                         reason: String) throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 30, seed: 8)
        let first = try #require(try StepLogStore.open(dir, options: .fullReplayReadOnly).segmentInfos.first)
        var snapshot = try SegmentSnapshot.load(for: first, directory: dir).get()
        try #require(!snapshot.samples.isEmpty)
        change(&snapshot.samples[0])
        let path = dir + "/" + SegmentName.snapshotFileName(sequence: first.sequence)
        writeFile(path, snapshot.encoded())
        let error = #expect(throws: StepLogError.self) { _ = try StepLogStore.open(dir, options: StoreOptions(readOnly: true)) }
        let expected = StepLogError.corruption(path: path, offset: Int64(FormatConstants.snapshotHeaderSize), kind: kind)
        #expect(error == expected)
        #expect(error.map { $0.description.hasSuffix(": " + reason) } == true)
        #expect(throws: Never.self) { _ = try StepLogStore.open(dir, options: .fullReplayReadOnly) }
    }

    @Test func aSnapshotEntryHoldingTheNilUUIDFailsTheOpenInOneLine() throws {
        try expectFirstSnapshotEntryRefused({ $0.uuid = UUIDBytes(high: 0, low: 0) }, kind: .snapshotEntryNilUUID(entry: 0),
                                            reason: "snapshot entry 0 holds the nil UUID")
    }

    /// A snapshot entry pointing inside its segment's header: no record starts
    /// there, and at offset 0 of the first segment the position is 0, the
    /// index's empty slot ("position 0 holds no record" trapped; found by the
    /// snapshot fuzz target in CI, reproducer in its corpus).
    @Test func aSnapshotEntryPointingIntoTheSegmentHeaderFailsTheOpenInOneLine() throws {
        for offset: UInt32 in [0, UInt32(FormatConstants.segmentHeaderSizeV1) - 1] {
            try expectFirstSnapshotEntryRefused({
                $0.offset = offset
                $0.flags |= FormatConstants.snapshotEntryHasVersion
            }, kind: .snapshotEntryInHeader(entry: 0, offset: UInt64(offset)), reason: "snapshot entry 0 points at offset \(offset), inside the segment's header")
        }
    }

    /// A snapshot header whose checksums match but whose count of keys is
    /// impossible (past Int.max trapped sizing the index; found by the
    /// snapshot fuzz target, reproducer in its corpus) only sizes the index
    /// no larger than the segments could need: the store opens as by replay.
    @Test func anImpossibleKeyCountInASnapshotDoesNotSizeTheIndex() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        try writeKnownHistory(dir, segmentSize: 16 << 10, batches: 30, seed: 9)
        let replayed = try StepLogStore.open(dir, options: .fullReplayReadOnly)
        let expected = replayed.counts
        let first = try #require(replayed.segmentInfos.first)
        for keys in [UInt64.max, UInt64(Int.max) + 1, 1 << 40] {
            var snapshot = try SegmentSnapshot.load(for: first, directory: dir).get()
            snapshot.keysAfter = keys
            writeFile(dir + "/" + SegmentName.snapshotFileName(sequence: first.sequence), snapshot.encoded())
            let store = try StepLogStore.open(dir, options: StoreOptions(readOnly: true))
            #expect(store.openReport.segmentsFromSnapshots >= 1, "the snapshot is still used")
            #expect(store.counts == expected, "keysAfter \(keys)")
        }
    }
}
