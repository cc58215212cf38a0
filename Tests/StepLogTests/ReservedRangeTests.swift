import Foundation
import Testing
@testable import StepLog

/// A store whose last segment reserved a range of positions (a compaction's
/// output whose follower is gone) opens for reading; a writer continues it in
/// a new segment where the range ends, and the store opens again. Found by
/// fuzzing store-open (reproducer in Tests/Fuzz/corpus/store-open/): the
/// writer began the next segment where the data ended, and no open accepted
/// the store after it.
@Suite struct ReservedRangeTests {
    /// Rewrites the header of the store's one segment to reserve positions up
    /// to `rangeEnd`.
    static func reserve(_ tmp: TemporaryDirectory, upTo rangeEnd: (SegmentInfo) -> UInt64) throws -> UInt64 {
        let path = segmentFiles(tmp.path)[0]
        var bytes = readFile(path)
        var header = try bytes.withUnsafeBytes { try SegmentHeader.decode($0).get() }
        let info = SegmentInfo(header: header, path: path, size: Int64(bytes.count))
        header.rangeEnd = rangeEnd(info)
        bytes.replaceSubrange(0..<SegmentHeader.size(version: header.version), with: header.encoded())
        writeFile(path, bytes)
        return header.rangeEnd
    }

    /// A one-segment store of format `version` (2: the version 2 fixture) and its samples.
    static func oneSegment(version: UInt16) throws -> (TemporaryDirectory, [UUID: StepSample]) {
        if version == 2 {
            let tmp = try VersionTwoTests.copyOfTheStore()
            let store = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
            defer { try? store.close() }
            return (tmp, try VersionTwoTests.samples(store))
        }
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        _ = try store.upsert((1...20).map { makeSample($0) }, fetchedAt: Date())
        let samples = try VersionTwoTests.samples(store)
        try store.close()
        return (tmp, samples)
    }

    @Test(arguments: [UInt16(2), FormatConstants.formatVersion])
    func aWriterContinuesAfterTheLastSegmentsReservedRange(version: UInt16) throws {
        var (tmp, expected) = try Self.oneSegment(version: version)
        #expect(segmentFiles(tmp.path).count == 1)
        let rangeEnd = try Self.reserve(tmp) { $0.endPosition + 3 * 4096 }
        let reader = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(try VersionTwoTests.samples(reader) == expected)
        try reader.close()
        do {
            let store = try StepLogStore.open(tmp.path)
            #expect(store.segmentInfos.count == 2 && store.segmentInfos[1].basePosition == rangeEnd)
            #expect(store.segmentInfos[1].header.version == FormatConstants.formatVersion)
            let added = makeSample(99)
            #expect(try store.upsert([added], fetchedAt: Date()) == UpsertSummary(inserted: 1, updated: 0))
            expected[added.id] = added
            try store.close()
        }
        let reopened = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(try VersionTwoTests.samples(reopened) == expected)
        try reopened.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aLastSegmentPastItsReservedRangeIsRefusedByReadersAndWritersAlike() throws {
        let (tmp, _) = try Self.oneSegment(version: FormatConstants.formatVersion)
        let path = segmentFiles(tmp.path)[0]
        let rangeEnd = try Self.reserve(tmp) { $0.endPosition - 100 }
        let end = rangeEnd + 100
        let refusal = StepLogError.corruption(path: path, offset: Int64(rangeEnd), kind: .chain(.pastReservedRange(end: end, rangeEnd: rangeEnd)))
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true)) }
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path) }
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.map(\.what)
                == ["segment ends at position \(end), past the end of its reserved range (\(rangeEnd))"])
    }

    /// A range that ends before the segment's records begin is a damaged
    /// header, refused by readers and writers alike. Found by fuzzing
    /// store-open twice: the chain check's report underflowed for a range
    /// ending before the segment's base, and a writer padding a short header
    /// block grew a segment past a range ending inside it.
    @Test(arguments: [(UInt64(1 << 20), UInt64(4096)), (0, 402), (0, 4095)])
    func aRangeThatEndsBeforeTheRecordsBeginIsADamagedHeader(base: UInt64, rangeEnd: UInt64) throws {
        let (tmp, _) = try Self.oneSegment(version: FormatConstants.formatVersion)
        let path = segmentFiles(tmp.path)[0]
        var bytes = readFile(path)
        var header = try bytes.withUnsafeBytes { try SegmentHeader.decode($0).get() }
        header.basePosition = base
        header.rangeEnd = rangeEnd
        bytes.replaceSubrange(0..<SegmentHeader.size(version: header.version), with: header.encoded())
        writeFile(path, bytes)
        let problem = SegmentHeader.Problem.rangeBeforeData(rangeEnd: rangeEnd, dataStart: base + 4096)
        #expect(problem.description == "segment reserves positions up to \(rangeEnd), before its records begin (\(base + 4096))")
        let refusal = StepLogError.corruption(path: path, offset: Int64(FormatConstants.headerRangeEndOffset), kind: .segmentHeader(problem))
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true)) }
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path) }
    }

    @Test func aSegmentWithAReservedRangeAtTheLastNumberIsRefused() throws {
        let tmp = TemporaryDirectory()
        let name = SegmentName.fileName(sequence: FormatConstants.maxSequence)
        writeFile(tmp.path + "/" + name, SegmentHeader(sequence: FormatConstants.maxSequence, basePosition: 0, rangeEnd: 8192).encodedBlock())
        let refusal = StepLogError.corruption(path: tmp.path + "/" + name, offset: Int64(FormatConstants.headerSequenceOffset),
                                              kind: .segmentHeader(.sealedAtLastSequence(FormatConstants.maxSequence)))
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true)) }
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path) }
    }
}
