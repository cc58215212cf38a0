import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// An export is a snapshot (issue 13, point 1): `stepsync ingest` of a newer
/// export deletes what it no longer has; the older-export and 5% guards
/// refuse before writing a byte; `--keep-deleted` only adds.
@Suite(.serialized) struct ExportSnapshotTests {
    let stepsync = builtProduct("stepsync")
    static let januaryDate = "2021-03-10 08:00:00 -0800"
    static let marchDate = "2021-05-10 08:00:00 -0700"

    static func synced(_ record: ExportTestRecord, id: String, version: Int) -> ExportTestRecord {
        var r = record
        r.sourceName = "Pedometer++"
        r.device = nil
        r.metadata = [("HKMetadataKeySyncIdentifier", id), ("HKMetadataKeySyncVersion", String(version))]
        return r
    }

    /// 200 samples both exports share, an hour on.
    static func filler(dropping drop: Int = 0) -> [ExportTestRecord] {
        (drop..<200).map { ExportTestRecord.step(minute: 60 + 2 * $0, count: 40 + $0) }
    }

    /// January: two samples Health will consolidate, a bogus 20,000-step
    /// entry, an app's sample at sync version 1, two from the iPhone before
    /// it was renamed, and the shared ones.
    static func january() -> [ExportTestRecord] {
        [ExportTestRecord.step(minute: 0, count: 30), ExportTestRecord.step(minute: 2, count: 70),
         ExportTestRecord.step(minute: 4, count: 20_000),
         synced(ExportTestRecord.step(minute: 6, count: 100), id: "walk-6", version: 1),
         ExportTestRecord.step(minute: 8, count: 11, source: "Jane’s iPhone"),
         ExportTestRecord.step(minute: 10, count: 12, source: "Jane’s iPhone")] + filler()
    }

    /// March: the two consolidated into one of 100 steps spanning both, the
    /// bogus one gone, the app's sample at version 2 with another count (and
    /// version 1 still in the file, as Health may leave it: the reader keeps
    /// the highest), the iPhone's under its new name, the shared ones, and a
    /// walk from April.
    static func march(filler: [ExportTestRecord] = filler()) -> [ExportTestRecord] {
        var consolidated = ExportTestRecord.step(minute: 0, count: 100)
        consolidated.endDate = ExportTestRecord.step(minute: 2, count: 0).endDate
        var april = ExportTestRecord.step(minute: 40 * 1440, count: 777)
        april.sourceName = "Jane’s iPhone 15"
        return [consolidated,
                synced(ExportTestRecord.step(minute: 6, count: 100), id: "walk-6", version: 1),
                synced(ExportTestRecord.step(minute: 6, count: 130), id: "walk-6", version: 2),
                ExportTestRecord.step(minute: 8, count: 11, source: "Jane’s iPhone 15"),
                ExportTestRecord.step(minute: 10, count: 12, source: "Jane’s iPhone 15")] + filler + [april]
    }

    static func write(_ dir: TemporaryDirectory, _ name: String, _ records: [ExportTestRecord], date: String) throws -> String {
        try dir.write(name, ExportTestDocument.xml(records.map(\.xml), exportDate: date))
    }

    func run(_ args: [String]) throws -> (code: Int32, lines: [String]) {
        try runProgram(stepsync, args, mergeStandardError: false)
    }

    func runMerged(_ args: [String]) throws -> (code: Int32, text: String) {
        let r = try runProgram(stepsync, args, mergeStandardError: true)
        return (r.code, r.lines.joined(separator: "\n"))
    }

    /// Runs an ingest that must be refused: exit status 1, the store's files
    /// byte for byte as before. Returns the last line printed (the error).
    func refusedIngest(_ args: [String], store: String) throws -> String {
        let before = try storeFiles(store)
        let refused = try runMerged(args)
        #expect(refused.code == 1)
        #expect(try storeFiles(store) == before)
        return try #require(refused.text.split(separator: "\n").last.map(String.init))
    }

    func json(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    /// The store's live samples, opened read-only.
    func live(_ store: String) throws -> [UUID: StepSample] {
        var options = StoreOptions()
        options.readOnly = true
        let s = try StepLogStore.open(store, options: options)
        defer { try? s.close() }
        return try liveSamples(s)
    }

    func exportSamples(_ path: String) throws -> [UUID: StepSample] {
        Dictionary(uniqueKeysWithValues: try AppleHealthExportProvider(path: path).allSamples().map { ($0.id, $0) })
    }

    @Test func aNewerExportLeavesExactlyItsSamples() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let mar = try Self.write(dir, "march.xml", Self.march(), date: Self.marchDate)
        let store = dir.path + "/store"
        let first = try run(["ingest", "--store", store, "--source", jan])
        #expect(first.code == 0)
        #expect(first.lines.contains("  206 new, 0 changed, 0 deleted"), "\(first.lines)")
        #expect(try live(store) == (try exportSamples(jan)))

        let second = try run(["ingest", "--store", store, "--source", mar, "--json"])
        #expect(second.code == 0)
        let summary = try json(try #require(second.lines.first))
        // Deleted: the two consolidated, the bogus one, version 1, the two old-named.
        #expect(summary["deleted"] as? Int == 6)
        #expect(summary["new"] as? Int == 5)
        #expect(summary["changed"] as? Int == 0)
        // The 200 shared samples were known stored from the comparison: not read back, not written.
        let fetch = try #require(summary["fetch"] as? [String: Any])
        #expect(fetch["samplesUnchanged"] as? Int == 200 && fetch["samplesRelabeled"] as? Int == 0)
        let deletions = try #require(summary["deletions"] as? [String: Any])
        #expect(deletions["comparedWith"] as? Int == 206 && deletions["family"] as? String == "apple-health-export")
        let marchSamples = try exportSamples(mar)
        #expect(marchSamples.count == 205)
        #expect(try live(store) == marchSamples)                 // ids and content, exactly
        #expect(try live(store).values.reduce(0) { $0 + $1.count } == marchSamples.values.reduce(0) { $0 + $1.count })

        // The deletions wait for the upload; the same export again changes nothing.
        var options = StoreOptions()
        options.readOnly = true
        let opened = try StepLogStore.open(store, options: options)
        let janIDs = Set(try exportSamples(jan).keys)
        #expect(Set(try opened.pendingDeletions(limit: 100).map(\.id)) == janIDs.subtracting(marchSamples.keys))
        try opened.close()
        let before = try storeFiles(store)
        let again = try run(["ingest", "--store", store, "--source", mar])
        #expect(again.code == 0 && again.lines.contains("  0 new, 0 changed, 0 deleted"), "\(again.lines)")
        #expect(try storeFiles(store) == before)
        #expect(try live(store) == marchSamples)
    }

    @Test func anOlderExportIsRefusedWithTheStoreUntouched() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let mar = try Self.write(dir, "march.xml", Self.march(), date: Self.marchDate)
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", mar]).code == 0)
        let errorLine = try refusedIngest(["ingest", "--store", store, "--source", jan], store: store)
        #expect(errorLine == "stepsync ingest: \(jan): export is older than the last one imported (ExportDate 2021-03-10T16:00:00Z, last imported 2021-05-10T15:00:00Z); nothing was stored (--keep-deleted imports it without deletions)")
        // --keep-deleted takes it additively: January's samples come back beside March's.
        let kept = try run(["ingest", "--store", store, "--source", jan, "--keep-deleted"])
        #expect(kept.code == 0 && kept.lines.contains("  6 new, 0 changed, 0 deleted"), "\(kept.lines)")
        var union = try exportSamples(mar)
        union.merge(try exportSamples(jan)) { a, _ in a }
        #expect(try live(store) == union)
    }

    @Test func deletingMoreThanFivePercentIsRefusedUnlessAllowed() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        // A partial March export: 20 of the shared samples are missing too.
        let partial = try Self.write(dir, "partial.xml", Self.march(filler: Self.filler(dropping: 20)), date: Self.marchDate)
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", jan]).code == 0)
        let before = try storeFiles(store)
        let errorLine = try refusedIngest(["ingest", "--store", store, "--source", partial], store: store)
        // Not counted: the renamed iPhone's two, and walk-6's version 1 (replaced by version 2).
        #expect(errorLine == "stepsync ingest: \(partial): would delete 23 of the 206 stored export samples with no replacement (11.2%, more than 5%); nothing was stored. If this export is complete and yours, run again with --allow-deletions")
        #expect(try runMerged(["ingest", "--store", store, "--source", partial, "--keep-deleted", "--allow-deletions"]).code == 2)
        #expect(try storeFiles(store) == before)

        let allowed = try run(["ingest", "--store", store, "--source", partial, "--allow-deletions"])
        #expect(allowed.code == 0 && allowed.lines.contains("  5 new, 0 changed, 26 deleted"), "\(allowed.lines)")
        #expect(try live(store) == (try exportSamples(partial)))
    }

    /// Renaming the Watch renames all its samples: every one is deleted and
    /// added again under the new name — far more than 5% of the store, but
    /// none of it a loss, so the guard lets it through.
    @Test func aRenamedDeviceIsNotAMassDeletion() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let renamed = Self.filler().map { r -> ExportTestRecord in var u = r; u.sourceName = "Jane’s Apple\u{00A0}Watch"; return u }
        let mar = try Self.write(dir, "march.xml", Self.march(filler: renamed), date: Self.marchDate)
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", jan]).code == 0)
        let r = try run(["ingest", "--store", store, "--source", mar])
        #expect(r.code == 0 && r.lines.contains("  205 new, 0 changed, 206 deleted"), "\(r.lines)")
        #expect(try live(store) == (try exportSamples(mar)))
    }

    /// An app that re-saved a tenth of its samples with a higher sync
    /// version: the newer export holds only the new versions. Each old one is
    /// deleted, but replaced, not lost: the 5% guard lets the import through
    /// and the summary says they were replaced.
    @Test func syncVersionReplacementsAreNotLosses() throws {
        let dir = TemporaryDirectory("steplog-export")
        let app = (0..<100).map { Self.synced(ExportTestRecord.step(minute: 2 * $0, count: 10 + $0), id: "walk-\($0)", version: 1) }
        let resaved = app.enumerated().map { i, record -> ExportTestRecord in
            guard i % 5 == 0 else { return record }
            return Self.synced(ExportTestRecord.step(minute: 2 * i, count: 500 + i), id: "walk-\(i)", version: 2)
        }
        let jan = try Self.write(dir, "january.xml", app + Self.filler().prefix(100), date: Self.januaryDate)
        let mar = try Self.write(dir, "march.xml", resaved + Self.filler().prefix(100), date: Self.marchDate)
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", jan]).code == 0)
        let r = try run(["ingest", "--store", store, "--source", mar])
        #expect(r.code == 0, "\(r.lines)")
        #expect(r.lines.contains("  20 new, 0 changed, 20 deleted"), "\(r.lines)")
        #expect(r.lines.contains("  of the deleted, 20 replaced by a newer sync version its app saved"), "\(r.lines)")
        #expect(try live(store) == (try exportSamples(mar)))
    }

    /// An export without an `<ExportDate>` cannot say what it covers: it
    /// only adds, and leaves no anchor behind.
    @Test func anExportWithoutADateOnlyAdds() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let undated = try dir.write("undated.xml", ExportTestDocument.xml(Self.march().map(\.xml), exportDate: nil))
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", undated]).code == 0)
        var options = StoreOptions()
        options.readOnly = true
        let s = try StepLogStore.open(store, options: options)
        #expect(s.sourceAnchor(family: AppleHealthExportProvider.snapshotFamily) == nil)
        try s.close()
        let r = try run(["ingest", "--store", store, "--source", jan])
        #expect(r.code == 0 && r.lines.contains("  6 new, 0 changed, 4 deleted"), "\(r.lines)")
        let u = try run(["ingest", "--store", store, "--source", undated])
        #expect(u.code == 0 && u.lines.contains("  4 new, 0 changed, 0 deleted"), "\(u.lines)")
    }

    @Test func keepDeletedOnlyAdds() throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let mar = try Self.write(dir, "march.xml", Self.march(), date: Self.marchDate)
        let store = dir.path + "/store"
        #expect(try run(["ingest", "--store", store, "--source", jan]).code == 0)
        let kept = try run(["ingest", "--store", store, "--source", mar, "--keep-deleted"])
        #expect(kept.code == 0 && kept.lines.contains("  5 new, 0 changed, 0 deleted"), "\(kept.lines)")
        var union = try exportSamples(jan)
        union.merge(try exportSamples(mar)) { a, _ in a }
        #expect(union.count == 211)
        #expect(try live(store) == union)
        // No anchor was recorded: January can still be imported as a
        // snapshot (deleting March's four samples that start before its
        // ExportDate; April's is after it and stays), and March then applies
        // its deletions and brings those four back.
        let janAgain = try run(["ingest", "--store", store, "--source", jan])
        #expect(janAgain.code == 0 && janAgain.lines.contains("  0 new, 0 changed, 4 deleted"), "\(janAgain.lines)")
        let applied = try run(["ingest", "--store", store, "--source", mar])
        #expect(applied.code == 0 && applied.lines.contains("  4 new, 0 changed, 6 deleted"), "\(applied.lines)")
        #expect(try live(store) == (try exportSamples(mar)))
    }

    /// A store filled before origins were recorded holds its export samples
    /// unlabeled, and a sample with metadata under the id it had before
    /// metadata counted: the newer export deletes the absent ones and the old
    /// id (not counted as a loss), and leaves the mock's samples alone.
    @Test func aStoreFromBeforeOriginsIsComparedToo() async throws {
        let dir = TemporaryDirectory("steplog-export")
        let jan = try Self.write(dir, "january.xml", Self.january(), date: Self.januaryDate)
        let mar = try Self.write(dir, "march.xml", Self.march(), date: Self.marchDate)
        let store = try StepLogStore.open(dir.path + "/store")
        defer { try? store.close() }
        var old = try AppleHealthExportProvider(path: jan).allSamples().map { s -> StepSample in var u = s; u.origin = .unspecified; return u }
        // walk-6 version 2 as an older version stored it: the id without its metadata.
        let walk = Self.synced(ExportTestRecord.step(minute: 6, count: 130), id: "walk-6", version: 2)
        let newest = try #require(try AppleHealthExportProvider(path: mar).allSamples().first { $0.id == walk.expectedID })
        var legacy = newest
        legacy.id = walk.legacyID
        legacy.origin = .unspecified
        old.append(legacy)
        let mockSamples = try await MockStepDataProvider(configuration: MockConfiguration(days: 1, endDay: 18_700, watch: false))
            .getRawStepSamples(for: interval(18_699 * day, 18_700 * day))
            .map { s -> StepSample in var u = s; u.origin = .unspecified; return u }
        #expect(mockSamples.count >= 50)
        try store.upsert(old + mockSamples, fetchedAt: Date())
        try store.sync()

        let r = try await ingestWithDeletions(try AppleHealthExportProvider(path: mar), into: store)
        let plan = try #require(r.plan)
        #expect(plan.deletions.comparedWith == 207)         // January's 206 and the legacy id; not the mock's
        // Replaced: the legacy id, the two samples of the renamed iPhone, and
        // walk-6's version 1 (the app saved version 2).
        #expect(plan.deletions.withReplacement == 4 && plan.deletions.losses == 3)
        #expect(plan.deletions.replacedBySyncVersion == 1)
        #expect(r.deleted.deleted == 7)
        var wanted = try exportSamples(mar)
        for m in mockSamples { wanted[m.id] = m }
        #expect(try liveSamples(store) == wanted)
    }
}
