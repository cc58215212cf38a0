import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// An Apple Health export through the whole pipeline: layering over the
/// export's own range, fetch, upload, and re-imports of the same or a newer export.
@Suite struct ExportPipelineTests {
    /// `n` step records a few hours apart over ~`n/8` days, offset `offset`.
    func records(_ range: Range<Int>, offset: String = "-0800") -> [ExportTestRecord] {
        range.map { ExportTestRecord.step(minute: $0 * 180, count: 100 + $0 % 400, offset: offset) }
    }

    func ingest(_ path: String, into store: StepLogStore) async throws -> FetchSummary {
        let provider = try AppleHealthExportProvider(path: path)
        try await LayeringService(provider: provider, store: store).performLayering()
        return try await FetchService(provider: provider, store: store).fetchPending()
    }

    @Test func theSameExportTwiceLeavesTheStoreUnchanged() async throws {
        let tmp = TemporaryDirectory("steplog-export")
        let zip = ExportTestZip()
        zip.add("apple_health_export/export.xml", ExportTestDocument.xml(records: records(0..<400)))
        let path = try tmp.write("export.zip", zip.finished())
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let first = try await ingest(path, into: store)
        #expect(first.samples.inserted == 400)
        // Layering used the export's own range, not "10 years back from now".
        let range = try #require(store.layeringRanges.first)
        #expect(range.startMilliseconds > ExportTestDates.base - 86_400_000 && range.startMilliseconds <= ExportTestDates.base)
        let bytes = store.counts.bytes
        let again = try await ingest(path, into: store)
        #expect(again.samplesSeen == 0 && store.counts.bytes == bytes)
    }

    @Test func aNewerExportAddsExactlyTheNewSamplesAndKeepsUploadedOnesSynced() async throws {
        let tmp = TemporaryDirectory("steplog-export")
        let older = try tmp.write("older.xml", ExportTestDocument.xml(records: records(0..<300)))
        // The newer export prints the same records with another UTC offset and
        // another HKDevice address, and has 120 more.
        var newerRecords = records(0..<300, offset: "+0100").map { r -> ExportTestRecord in
            var r = r
            r.device = r.device?.replacingOccurrences(of: "0x282a45810", with: "0x7fe3b1c04")
            return r
        }
        newerRecords += records(300..<420)
        let newer = try tmp.write("newer.xml", ExportTestDocument.xml(records: newerRecords))
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        _ = try await ingest(older, into: store)
        let server = InMemoryAPIClient()
        try await APISyncService(store: store, client: server, sleep: { _ in }).syncAll()
        #expect(store.counts.syncedSamples == 300)

        let summary = try await ingest(newer, into: store)
        #expect(summary.samples.inserted == 120 && summary.samples.updated == 0 && summary.samples.unchanged == 300)
        #expect(store.counts.samples == 420 && store.counts.syncedSamples == 300 && store.counts.unsyncedSamples == 120)
        let upload = try await APISyncService(store: store, client: server, sleep: { _ in }).syncAll()
        #expect(upload.samplesSynced == 120 && server.records.count == 420)
    }
    /// Days of steps, then a sample of 0 steps between two of more than an
    /// interval may hold, so that every interval holding the zero and either
    /// of them is divided: the zero ends alone in one (43 records; the zero).
    func aZeroAloneInItsStretch() -> ([ExportTestRecord], ExportTestRecord) {
        var zero = ExportTestRecord.step(minute: 15 * 1440, count: 0)
        zero.value = "0"
        return (records(0..<40) + [ExportTestRecord.step(minute: 14 * 1440, count: 11_000), zero,
                                   ExportTestRecord.step(minute: 16 * 1440, count: 11_000)], zero)
    }

    /// A sample of 0 steps, or of a fraction that rounds to none, alone in its
    /// stretch of time: the aggregate over it is 0, yet the sample is stored
    /// like any other. (Both were once left behind: the zero in an interval
    /// recorded "empty", the fraction, the export's last record, outside the
    /// data range the aggregate's search found.)
    @Test func samplesThatCountNoWholeStepAreStoredToo() async throws {
        let tmp = TemporaryDirectory("steplog-export")
        let (records, zero) = aZeroAloneInItsStretch()
        var fraction = ExportTestRecord.step(minute: 30 * 1440, count: 0)
        fraction.value = "0.4"
        let path = try tmp.write("export.xml", ExportTestDocument.xml(records: records + [fraction]))
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let summary = try await ingest(path, into: store)
        #expect(summary.samples.inserted == 44)
        #expect(try store.sample(id: zero.expectedID)?.sample.countThousandths == 0)
        #expect(try store.sample(id: fraction.expectedID)?.sample.countThousandths == 400)
    }

    /// A store layered under the rules before lead-zero (`LayeringService.rules`
    /// 1) recorded a leaf empty when its aggregate was 0, a sample of 0 steps
    /// inside, and its ranges carry the fingerprint of the source alone. The
    /// next ingest of the same export does not resume that tree: it layers again
    /// and stores the sample (resumed, it fetched nothing).
    @Test func aTreeDrawnByOlderRulesIsLayeredAgain() async throws {
        let tmp = TemporaryDirectory("steplog-export")
        let (all, zero) = aZeroAloneInItsStretch()
        let path = try tmp.write("export.xml", ExportTestDocument.xml(records: all))
        let dir = TemporaryDirectory()
        let store = try StepLogStore.open(dir.path)
        let provider = try AppleHealthExportProvider(path: path)
        let window = try await provider.layeringRange(now: Date())
        let lo = Milliseconds.from(window.start), hi = Milliseconds.from(window.end)
        let older = LayeringRange.fingerprint(provider.sourceIdentity)
        try store.recordLayeringRange(LayeringRange(startMilliseconds: lo, endMilliseconds: hi, sourceFingerprint: older))
        try store.recordIntervals([SyncInterval(id: DerivedUUID.make(DerivedUUID.intervalDomain, older, UInt64(bitPattern: lo),
                                                                     UInt64(bitPattern: hi)),
                                                startMilliseconds: lo, endMilliseconds: hi, stepCount: 0, status: .empty)])
        try store.sync()
        let summary = try await ingest(path, into: store)
        #expect(summary.samples.inserted == all.count)
        #expect(try store.sample(id: zero.expectedID)?.sample.countThousandths == 0)
        #expect(store.layeringRanges.allSatisfy { $0.sourceFingerprint == LayeringService.fingerprint(of: provider) })
    }
}
