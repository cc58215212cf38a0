import Foundation
import StepLog
import Testing
@testable import StepSync

/// Record identity: the derived UUIDs are stable across re-reads and across
/// newer exports that re-print the same records, and are the documented
/// function of the fields (golden vectors computed by an independent
/// implementation of docs/EXPORT.md: Python with the `mmh3` package).
@Suite struct ExportIdentityTests {
    @Test func murmurHash3GoldenVectors() {
        let vectors: [([UInt8], UInt64, UInt64)] = [
            ([], 0, 0),
            (Array("hello".utf8), 0xCBD8_A7B3_41BD_9B02, 0x5B1E_906A_48AE_1D19),
            (Array("The quick brown fox jumps over the lazy dog".utf8), 0xE34B_BC7B_BC07_1B6C, 0x7A43_3CA9_C49A_9347),
            (Array(0..<31), 0x053D_D3E1_A32C_D094, 0x9EE5_9AEF_B400_5490),
            (Array(0..<16), 0x4449_24B5_9190_3F30, 0xAB90_6456_762F_E845),
            (Array(0..<9), 0xFBB4_CB0F_6E81_2D32, 0x78DE_751D_0200_FFB9),
        ]
        for (bytes, h1, h2) in vectors {
            let digest = MurmurHash3x64.hash(bytes)
            #expect(digest.0 == h1 && digest.1 == h2, "\(bytes.count) bytes")
            // Streaming in uneven pieces gives the same digest.
            var hasher = MurmurHash3x64()
            var i = 0
            var piece = 1
            while i < bytes.count {
                let end = min(bytes.count, i + piece)
                hasher.update(Array(bytes[i..<end]))
                i = end
                piece = piece * 2 + 1
            }
            let streamed = hasher.finalize()
            #expect(streamed.0 == h1 && streamed.1 == h2)
        }
    }

    @Test func derivedUUIDGoldenVectors() {
        let watch = ExportRecordIdentity.uuid(
            type: "HKQuantityTypeIdentifierStepCount", sourceName: "Apple\u{00A0}Watch", sourceVersion: "4.3.1",
            device: "<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple, model:Watch, hardware:Watch2,4, software:4.3.1>",
            unit: "count", creationDate: ExportDateParser.milliseconds("2018-09-10 02:47:35 -0700"),
            startDate: 1_536_571_735_000, endDate: ExportDateParser.milliseconds("2018-09-10 02:38:55 -0700")!, value: "72")
        #expect(watch.uuidString == "F63F8D22-B066-8400-BFBE-86BC0290F202")
        let phone = ExportRecordIdentity.uuid(
            type: "HKQuantityTypeIdentifierStepCount", sourceName: "Simon\u{2019}s iPhone", sourceVersion: nil, device: nil,
            unit: "count", creationDate: nil, startDate: ExportDateParser.milliseconds("2016-03-27 01:59:59 +0100")!,
            endDate: ExportDateParser.milliseconds("2016-03-27 03:00:10 +0200")!, value: "12.0")
        #expect(phone.uuidString == "B4822997-4666-8E81-93C1-1E2DF21683CC")
    }

    /// Metadata enters the identity as a sorted section after the v1 fields;
    /// a record without metadata keeps its v1 id. Computed by a separate
    /// pure-Python MurmurHash3 x64-128 over the bytes docs/EXPORT.md lists
    /// (which also reproduces the v1 vector above).
    @Test func metadataIdentityGoldenVectors() {
        func watch(_ metadata: [(key: String?, value: String?)]) -> UUID {
            ExportRecordIdentity.uuid(
                type: "HKQuantityTypeIdentifierStepCount", sourceName: "Apple\u{00A0}Watch", sourceVersion: "4.3.1",
                device: "<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple, model:Watch, hardware:Watch2,4, software:4.3.1>",
                unit: "count", creationDate: ExportDateParser.milliseconds("2018-09-10 02:47:35 -0700"),
                startDate: 1_536_571_735_000, endDate: ExportDateParser.milliseconds("2018-09-10 02:38:55 -0700")!, value: "72",
                metadata: metadata)
        }
        #expect(watch([]).uuidString == "F63F8D22-B066-8400-BFBE-86BC0290F202")     // no metadata: the v1 id
        #expect(watch([("HKWasUserEntered", "1")]).uuidString == "8482B684-750D-82A4-8E78-6A067854C746")
        #expect(watch([("note", nil)]).uuidString == "276A2C48-9E62-8ADD-BBC9-6CAD7711D557")
        let printed: [(key: String?, value: String?)] = [
            ("HKMetadataKeySyncVersion", "2"), ("HKExternalUUID", "8C1D0E64-5F2A-4B6B-9D43-2E5C0F7A1B39"),
            ("HKMetadataKeySyncIdentifier", "walk-2018-09-10-0228"),
        ]
        #expect(watch(printed).uuidString == "B88B235F-100D-81E9-B1E6-B56C02DA1744")
        #expect(watch(printed.reversed()) == watch(printed))          // the order printed does not count
        #expect(watch([("a", "bc")]) != watch([("ab", "c")]))
        #expect(watch([("a", "")]) != watch([("a", nil)]))
        #expect(watch([("a", "1"), ("a", "1")]) != watch([("a", "1")]))
    }

    @Test func fieldsAreLengthPrefixedAndEveryFieldCounts() {
        func id(_ name: String, _ version: String?, value: String = "5", device: String? = nil, unit: String? = "count") -> UUID {
            ExportRecordIdentity.uuid(type: "HKQuantityTypeIdentifierStepCount", sourceName: name, sourceVersion: version,
                                      device: device, unit: unit, creationDate: nil, startDate: 0, endDate: 0, value: value)
        }
        #expect(id("ab", "c") != id("a", "bc"))
        #expect(id("a", "") != id("a", nil))
        #expect(id("a", nil, value: "5") != id("a", nil, value: "6"))
        #expect(id("a", nil, unit: nil) != id("a", nil, unit: ""))
        // Only the device's memory address is ignored.
        #expect(id("a", nil, device: "<<HKDevice: 0x1>, name:W>") == id("a", nil, device: "<<HKDevice: 0xabcdef0>, name:W>"))
        #expect(id("a", nil, device: "<<HKDevice: 0x1>, name:W>") != id("a", nil, device: "<<HKDevice: 0x1>, name:V>"))
        let uuid = UUIDBytes(id("x", "y"))
        #expect((uuid.high >> 12) & 0xF == 8)          // version 8
        #expect(uuid.low >> 62 == 0b10)                // RFC 9562 variant
    }

    @Test func theSameExportReadTwiceGivesTheSameIDs() throws {
        let dir = TemporaryDirectory("steplog-export")
        let records = (0..<200).map { ExportTestRecord.step(minute: $0, count: $0 % 17, source: $0 % 2 == 0 ? "Apple\u{00A0}Watch" : "Simon\u{2019}s iPhone") }
        let path = try dir.write("export.xml", ExportTestDocument.xml(records: records))
        let first = try AppleHealthExportProvider(path: path)
        let second = try AppleHealthExportProvider(path: path)
        #expect(first.allSamples() == second.allSamples())
        #expect(first.sourceIdentity == second.sourceIdentity)
        #expect(first.sourceIdentity.hasPrefix("export:") && first.sourceIdentity.count == 7 + 16)
        #expect(Set(first.allSamples().map(\.id)) == Set(records.map(\.expectedID)))
    }

    /// A newer export re-prints the old records with another UTC offset (the
    /// phone is in another time zone now) and other HKDevice addresses, and
    /// adds records: it holds every old UUID plus exactly the new ones.
    @Test func aNewerExportContainsTheOldIDsPlusExactlyTheNewOnes() throws {
        let dir = TemporaryDirectory("steplog-export")
        let old = (0..<120).map { ExportTestRecord.step(minute: $0 * 7, count: 3 * $0) }
        func reprinted(_ record: ExportTestRecord) -> ExportTestRecord {
            var copy = record
            for keyPath in [\ExportTestRecord.startDate, \.endDate, \.creationDate] {
                let instant = ExportDateParser.milliseconds(copy[keyPath: keyPath]!)!
                copy[keyPath: keyPath] = ExportTestDates.text(instant, offset: "+0530")
            }
            copy.device = copy.device!.replacingOccurrences(of: "0x282a45810", with: "0x600002b4c1e0")
            return copy
        }
        let added = (0..<30).map { ExportTestRecord.step(minute: 2_000 + $0, count: 1 + $0, source: "Simon\u{2019}s iPhone", offset: "+0530") }
        let newer = old.map(reprinted) + added
        #expect(newer[0].xml != old[0].xml)      // really printed differently

        let oldProvider = try AppleHealthExportProvider(path: try dir.write("old.xml", ExportTestDocument.xml(records: old)))
        let newProvider = try AppleHealthExportProvider(path: try dir.write("new.xml", ExportTestDocument.xml(records: newer)))
        let oldIDs = Set(oldProvider.allSamples().map(\.id))
        let newIDs = Set(newProvider.allSamples().map(\.id))
        #expect(oldIDs.count == 120)
        #expect(oldIDs.isSubset(of: newIDs))
        #expect(newIDs.subtracting(oldIDs) == Set(added.map(\.expectedID)))
        // The re-printed samples are the same samples, field for field.
        let newByID = Dictionary(uniqueKeysWithValues: newProvider.allSamples().map { ($0.id, $0) })
        for sample in oldProvider.allSamples() { #expect(newByID[sample.id] == sample) }
        #expect(oldProvider.sourceIdentity != newProvider.sourceIdentity)
    }

    /// Health holds two samples that differ only in a MetadataEntry (another
    /// HKExternalUUID): the export must give two samples. Identical records
    /// (metadata included) still collapse, and are counted.
    @Test func metadataTwinsAreDistinctAndIdenticalRecordsCollapse() throws {
        let dir = TemporaryDirectory("steplog-export")
        var twinA = ExportTestRecord.step(minute: 5, count: 300)
        twinA.metadata = [("HKExternalUUID", "A1"), ("HKWasUserEntered", "0")]
        var twinB = twinA
        twinB.metadata = [("HKExternalUUID", "B2"), ("HKWasUserEntered", "0")]
        var reordered = twinA
        reordered.metadata = twinA.metadata.reversed()             // the same record, printed in another order
        let plain = ExportTestRecord.step(minute: 9, count: 12)
        let body = [twinA.xml, twinB.xml, reordered.xml, plain.xml, plain.xml,
                    "<Record type=\"HKQuantityTypeIdentifierStepCount\" sourceName=\"Apple&#xA0;Watch\" sourceVersion=\"8.5\" unit=\"count\" "
                        + "startDate=\"2021-03-01 09:30:00 -0800\" endDate=\"2021-03-01 09:31:00 -0800\" value=\"1\"><MetadataEntry key=\"k\" value=\"a&amp;b\"/>"
                        + "<HeartRateVariabilityMetadataList/></Record>"]
        let provider = try AppleHealthExportProvider(path: try dir.write("twins.xml", ExportTestDocument.xml(body)))
        let ids = provider.allSamples().map(\.id)
        #expect(provider.sampleCount == 4)
        #expect(Set(ids).isSuperset(of: [twinA.expectedID, twinB.expectedID, plain.expectedID]))
        #expect(twinA.expectedID != twinB.expectedID && twinA.legacyID == twinB.legacyID)
        #expect(plain.expectedID == plain.legacyID)                   // no metadata: the id it always had
        #expect(provider.summary.duplicatesCollapsed == 2)           // `reordered` and the second `plain`
        // Entities are decoded before hashing; other children do not count.
        var coded = ExportTestRecord.step(minute: 30, count: 1)
        coded.device = nil
        coded.creationDate = nil
        coded.metadata = [("k", "a&b")]
        #expect(ids.contains(coded.expectedID))
        // The ids they had before metadata counted, for an upgrade to map.
        let legacy = Dictionary(grouping: provider.reidentifiedSamples, by: \.legacyID).mapValues { Set($0.map(\.id)) }
        #expect(legacy[twinA.legacyID] == [twinA.expectedID, twinB.expectedID])
        #expect(legacy[plain.legacyID] == nil && legacy.count == 2)
    }

    /// An app replaces a sample by saving one with the same sync identifier
    /// and a higher version; when one export holds several versions, only
    /// the highest is a current sample. Scoped by source; a version that
    /// is not an integer takes no part; a higher version outside the sample
    /// contract still replaces the lower ones.
    @Test func onlyTheHighestSyncVersionIsCurrent() throws {
        let dir = TemporaryDirectory("steplog-export")
        func synced(_ minute: Int, _ count: Int, id: String, version: String?, source: String = "Pedometer++") -> ExportTestRecord {
            var record = ExportTestRecord.step(minute: minute, count: count, source: source)
            record.metadata = [("HKMetadataKeySyncIdentifier", id)] + (version.map { [("HKMetadataKeySyncVersion", $0)] } ?? [])
            return record
        }
        let v1 = synced(0, 100, id: "day-1", version: "1")
        let v3 = synced(0, 130, id: "day-1", version: "3")
        let v2 = synced(1, 120, id: "day-1", version: "2")
        let otherSource = synced(2, 50, id: "day-1", version: "1", source: "Fitbit")
        let noVersion = synced(3, 7, id: "day-1", version: "x")
        let lone = synced(4, 9, id: "day-2", version: "1")
        let w1 = synced(5, 10, id: "day-3", version: "1")
        var w2 = synced(6, 10, id: "day-3", version: "2")
        w2.value = "2000000"                                          // outside the contract, but the current version
        let records = [v1, v3, v2, otherSource, noVersion, lone, w1, w2]
        let provider = try AppleHealthExportProvider(path: try dir.write("sync.xml", ExportTestDocument.xml(records: records)))
        #expect(Set(provider.allSamples().map(\.id)) == Set([v3, otherSource, noVersion, lone].map(\.expectedID)))
        #expect(provider.summary.syncVersionsReplaced == 3)
        #expect(provider.summary.outOfContractStepRecords == 1)
        #expect(Set(provider.replacedRecords.map(\.id)) == Set([v1, v2, w1].map(\.expectedID)))
        let current = try #require(provider.syncedRecords.first { $0.id == v3.expectedID })
        #expect(current == ExportSyncedRecord(id: v3.expectedID, startMilliseconds: ExportTestDates.base, sourceName: "Pedometer++",
                                              syncIdentifier: "day-1", syncVersion: 3))
        #expect(provider.syncedRecords.first { $0.id == noVersion.expectedID }?.syncVersion == nil)
        #expect(provider.syncedRecords.count == 4)
        // What a deletion pass needs: the export date, and each current sample's id and start.
        #expect(provider.exportDateMilliseconds == ExportDateParser.milliseconds("2021-06-30 21:14:05 -0700"))
        var keys: [UUID: Int64] = [:]
        provider.forEachSampleKey { keys[$0] = $1 }
        #expect(keys.count == 4 && keys[lone.expectedID] == ExportTestDates.base + 4 * 60_000)
        #expect(provider.contains(id: lone.expectedID, startMilliseconds: ExportTestDates.base + 4 * 60_000))
        #expect(!provider.contains(id: v1.expectedID, startMilliseconds: ExportTestDates.base))
        #expect(!provider.contains(id: lone.expectedID, startMilliseconds: ExportTestDates.base))
    }
}
