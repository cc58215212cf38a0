import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// A store holds one kind of source: the mock's made-up steps or real ones.
/// Mixing is refused before anything is read or written; a store mixed by an
/// older version is reported and cleaned (`stepsync forget --source mock`).
@Suite(.serialized) struct SourceKindsTests {
    let stepsync = builtProduct("stepsync")

    static func files(of store: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: store) where name != "LOCK" {
            files[name] = readFile(store + "/" + name)
        }
        return files
    }

    func exportFile(_ tmp: TemporaryDirectory) -> String {
        let path = tmp.sub("export.xml")
        writeFile(path, Array(ExportTestDocument.xml(records: (0..<30).map { ExportTestRecord.step(minute: 3 * $0, count: 40 + $0) }).utf8))
        return path
    }

    @Test func eachKindIsRefusedInAStoreOfTheOtherLeavingItByteIdentical() throws {
        let tmp = TemporaryDirectory()
        let export = exportFile(tmp)
        let real = tmp.sub("steps"), mock = tmp.sub("steps-mock")
        // The summary names the export by its path (not "export:<hash>").
        #expect(try runProgram(stepsync, ["ingest", "--store", real, "--source", export]).lines.first == "ingest complete: \(export)")
        #expect(try runProgram(stepsync, ["ingest", "--store", mock, "--source", "mock:days=5,end=2026-11-21"]).code == 0)
        let realBefore = try Self.files(of: real), mockBefore = try Self.files(of: mock)

        let intoReal = try runProgram(stepsync, ["ingest", "--store", real, "--source", "mock"], mergeStandardError: true)
        #expect(intoReal.code == 1)
        #expect(intoReal.lines == ["stepsync ingest: \(real) holds 30 real samples, and the mock's made-up steps do not go beside them; give the mock a store of its own (e.g. --store \(real)-mock); nothing was stored"])
        let intoMock = try runProgram(stepsync, ["ingest", "--store", mock, "--source", export], mergeStandardError: true)
        #expect(intoMock.code == 1 && intoMock.lines.count == 1)
        #expect(intoMock.lines.first?.hasSuffix("use a new store (e.g. --store \(mock)-health), or first remove the mock's: stepsync forget --store \(mock) --source mock; nothing was stored") == true,
                "\(intoMock.lines)")
        #expect(try Self.files(of: real) == realBefore && Self.files(of: mock) == mockBefore)

        // Each store says what it holds; the same kind goes in as before.
        #expect(try runProgram(stepsync, ["status", "--store", real]).lines.contains("  sources: real (no mock samples)"))
        let mockSamples = try #require(try status(mock)["samples"] as? Int)
        #expect(try runProgram(stepsync, ["status", "--store", mock]).lines.contains("  sources: the mock (\(Format.count(mockSamples)) made-up samples, --source mock)"))
        #expect(try runProgram(stepsync, ["ingest", "--store", real, "--source", export]).code == 0)
        #expect(try runProgram(stepsync, ["ingest", "--store", mock, "--source", "mock:days=6,end=2026-11-22"]).code == 0)
    }

    func status(_ store: String) throws -> [String: Any] {
        let line = try #require(try runProgram(stepsync, ["status", "--store", store, "--json"]).lines.first)
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    /// The counts come from the samples: rewritten and deleted ones (which
    /// leave records behind) are counted by their current version.
    @Test func kindsCountLiveSamplesOnly() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("s"))
        defer { try? store.close() }
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: 0, realSamples: 0))
        let mockSamples = try mock(days: 2).getRawStepSamplesSync()
        func real(_ i: Int) -> StepSample {
            StepSample(id: UUID(), startMilliseconds: Int64(i) * 60_000, endMilliseconds: Int64(i) * 60_000 + 30_000, count: 10 + i,
                       sourceBundleId: "com.apple.health.1234", sourceDeviceName: "iPhone", origin: .export)
        }
        let reals = (0..<50).map(real)
        try store.upsert(reals, fetchedAt: Date())
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: 0, realSamples: 50))
        try store.upsert(mockSamples, fetchedAt: Date())
        // An unlabeled sample with the mock's bundle id (a store from before origins) is the mock's.
        var legacy = mockSamples[0]
        legacy.id = UUID()
        legacy.origin = .unspecified
        try store.upsert([legacy], fetchedAt: Date())
        let mixed = try StoreSourceKinds.of(store)
        #expect(mixed == StoreSourceKinds(mockSamples: mockSamples.count + 1, realSamples: 50) && mixed.isMixed)
        // Rewritten and deleted samples: their old records stay in the log.
        var changed = reals[0]
        changed.count += 1
        try store.upsert([changed], fetchedAt: Date())
        try store.delete(mockSamples.prefix(10).map(\.id) + [reals[1].id], at: Date())
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: mockSamples.count + 1 - 10, realSamples: 49))
        try store.delete(mockSamples.dropFirst(10).map(\.id) + [legacy.id], at: Date())
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: 0, realSamples: 49))
    }

    /// A store whose samples carry their origin is counted from what its
    /// index keeps: no sample is read (a damaged record behind an index
    /// snapshot does not stop it, where reading every record would), and the
    /// counts follow relabels and deletions.
    @Test func kindsOfALabeledStoreReadNoSample() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("s")
        let store = try StepLogStore.open(dir, options: StoreOptions(segmentSize: 16 << 10))
        func sample(_ i: Int, _ origin: SampleOrigin) -> StepSample {
            StepSample(id: UUID(), startMilliseconds: Int64(i) * 60_000, endMilliseconds: Int64(i) * 60_000 + 30_000, count: 10 + i,
                       sourceBundleId: origin == .mock ? StoreSourceKinds.mockBundleId : "com.apple.health.1234", sourceDeviceName: "iPhone", origin: origin)
        }
        let reals = (0..<300).map { sample($0, .export) }, mocks = (0..<100).map { sample(1_000 + $0, .mock) }
        for batch in stride(from: 0, to: 300, by: 50) { try store.upsert(reals[batch..<(batch + 50)], fetchedAt: Date()) }
        try store.upsert(mocks, fetchedAt: Date())
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: 100, realSamples: 300))
        var relabeled = Array(reals.prefix(10))
        for i in relabeled.indices { relabeled[i].origin = .live }
        #expect(try store.upsert(relabeled, fetchedAt: Date()).relabeled == 10)
        try store.delete(mocks.prefix(40).map(\.id) + [reals[20].id], at: Date())
        #expect(try StoreSourceKinds.of(store) == StoreSourceKinds(mockSamples: 60, realSamples: 299))
        store.waitForSnapshots()
        try store.close()

        // Damage a sample record of the first segment, which has an index snapshot.
        let first = dir + "/000000000001.log"
        var bytes = readFile(first)
        bytes[FormatConstants.dataStartV2 + 40] ^= 0x10
        writeFile(first, bytes)
        let reader = try StepLogStore.open(dir, options: StoreOptions(readOnly: true))
        #expect(reader.openReport.segmentsFromSnapshots > 0)
        #expect(try StoreSourceKinds.of(reader) == StoreSourceKinds(mockSamples: 60, realSamples: 299))
        #expect(throws: StepLogError.self) { _ = try reader.forEachSampleRecordSpan(parts: 2) { _, _ in } }
    }
}

extension MockStepDataProvider {
    /// Every sample of the mock's range.
    func getRawStepSamplesSync() throws -> [StepSample] {
        let ms = MockDay.millisecondsPerDay
        var samples: [StepSample] = []
        for day in configuration.firstDay..<configuration.endDay {
            samples += MockDay(configuration, day: day).samples(from: day * ms, to: (day + 1) * ms)
        }
        return samples
    }
}
