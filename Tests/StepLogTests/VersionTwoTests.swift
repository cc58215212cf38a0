import Foundation
import Testing
@testable import StepLog

/// Stores written by format version 2 (every store before fractional counts)
/// open, read the same, take writes — a count with a fraction among them, in
/// a new version 3 segment — and compact into version 3. The store is one a
/// version 2 build wrote (`Tests/Fixtures/stores/export-ios16-2c4e209`).
@Suite struct VersionTwoTests {
    static let segment = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/stores/export-ios16-2c4e209/000000000001.log").path

    static func copyOfTheStore() throws -> TemporaryDirectory {
        let tmp = TemporaryDirectory()
        try FileManager.default.copyItem(atPath: segment, toPath: tmp.path + "/000000000001.log")
        return tmp
    }

    static func samples(_ store: StepLogStore) throws -> [UUID: StepSample] {
        var all: [UUID: StepSample] = [:]
        try store.forEachSample { all[$0.sample.id] = $0.sample }
        return all
    }

    @Test func aVersionTwoStoreReadsTheSameAndItsRecordsAreVersionThreesBytes() throws {
        let tmp = try Self.copyOfTheStore()
        let bytes = readFile(Self.segment)
        let store = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(store.segmentInfos.map(\.header.version) == [2])
        let samples = try Self.samples(store)
        #expect(samples.count == 11 && samples.values.allSatisfy { $0.countFraction == 0 })
        #expect(readFile(tmp.path + "/000000000001.log") == bytes, "a read-only open writes nothing")
        // Each whole-count record this build writes is the one version 2 wrote, byte for byte.
        try store.forEachSample { stored in
            let buffer = WriteBuffer()
            SamplePayload.append(stored.sample, fetchedAt: stored.fetchedAtMilliseconds, synced: stored.isSynced, to: buffer)
            let encoded = Array(buffer.bytes)
            let found = bytes.indices.contains { i in i + encoded.count <= bytes.count && Array(bytes[i..<(i + encoded.count)]) == encoded }
            #expect(found, "\(stored.sample.id)")
        }
        try store.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }

    @Test func aVersionTwoStoreTakesFractionalCountsInAVersionThreeSegmentAndCompacts() throws {
        let tmp = try Self.copyOfTheStore()
        var expected: [UUID: StepSample]
        do {
            let store = try StepLogStore.open(tmp.path)
            #expect(store.openReport.sealedOlderVersion == "000000000001.log")
            #expect(store.segmentInfos.map(\.header.version) == [2, 3])
            expected = try Self.samples(store)
            var changed = expected.values.sorted { $0.id.uuidString < $1.id.uuidString }[0]
            changed.countThousandths += 250 // a written sample gains a fraction: a new version
            var fractional = makeSample(77)
            fractional.countThousandths = 2_741_700
            #expect(try store.upsert([changed, fractional], fetchedAt: Date()) == UpsertSummary(inserted: 1, updated: 1))
            expected[changed.id] = changed
            expected[fractional.id] = fractional
            #expect(try Self.samples(store) == expected)
            try store.close()
        }
        let reopened = try StepLogStore.open(tmp.path, options: .fullReplay)
        #expect(try Self.samples(reopened) == expected)
        try reopened.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)

        let compacted = try compactedToCurrentFormat(tmp.path)
        #expect(try Self.samples(compacted) == expected)
        try compacted.close()
        #expect(try StoreVerifier.verify(directory: tmp.path).problems.isEmpty)
    }
}
