import Foundation
import Testing
@testable import StepLog

/// Version 2's recovery rule for the newest segment (#15.1, format side) and
/// sector padding (#19.4): what a sync acknowledged is vouched for by the
/// synced-through record written after it, so damage there is corruption;
/// damage in bytes no sync acknowledged is an unsynced tail, dropped at open
/// even when intact records follow it (what a power loss leaves).
@Suite struct SyncedThroughTests {
    /// A writer that dies after `sync`: the records appended since reach the
    /// file (the page cache outlives the process) but were never synced.
    struct Killed {
        let dir: String
        /// The newest segment and where its acknowledged bytes end.
        let newest: String
        let syncedEnd: Int64
        /// The state at the last sync.
        let acknowledged: StoreDigest
    }

    func writeThenKill(_ dir: String, padding: Bool = true, unsyncedBatches: Int = 3) throws -> Killed {
        var options = StoreOptions(segmentSize: 1 << 20)
        options.padSyncsToSector = padding
        let store = try StepLogStore.open(dir, options: options)
        for batch in 0..<6 {
            try store.upsert((0..<20).map { makeSample(UInt64(batch * 20 + $0)) }, fetchedAt: Date(timeIntervalSince1970: 1))
            try store.delete([.test(UInt64(batch * 7))], at: Date(timeIntervalSince1970: 2))
            try store.markSynced(try store.unsyncedSamples(limit: 15))
            try store.sync()
        }
        let acknowledged = try StoreDigest.of(store)
        let syncedEnd = store.writer!.syncedSize
        for batch in 0..<unsyncedBatches {
            try store.upsert((0..<20).map { makeSample(UInt64(1_000 + batch * 20 + $0)) }, fetchedAt: Date(timeIntervalSince1970: 3))
            try store.delete([.test(UInt64(batch))], at: Date(timeIntervalSince1970: 4))
        }
        try store.writer!.flush()
        let newest = store.writer!.info.path
        store.abandon()
        return Killed(dir: dir, newest: newest, syncedEnd: syncedEnd, acknowledged: acknowledged)
    }

    @Test func eachAcknowledgingSyncEndsOnASectorAndIsVouchedForByTheNextRecord() throws {
        let tmp = TemporaryDirectory()
        let killed = try writeThenKill(tmp.path, unsyncedBatches: 1)
        #expect(killed.syncedEnd % 512 == 0)
        let records = try readAllRecords(tmp.path)
        var syncs = 0
        for (i, r) in records.enumerated() {
            guard case .syncedThrough(let claim) = r.record else { continue }
            syncs += 1
            // It claims its own offset, which a padding record (or a record
            // ending there) brought to a sector boundary.
            #expect(claim == UInt64(r.offset) && r.offset % 512 == 0)
            if i > 0, case .padding(let n) = records[i - 1].record { #expect(n + 9 == records[i - 1].size) }
        }
        #expect(syncs == 6, "one synced-through record after each of the six syncs")
        #expect(records.filter { if case .padding = $0.record { return true }; return false }.count == 6)
    }

    @Test func withoutPaddingSyncsEndWhereTheRecordsEnd() throws {
        let tmp = TemporaryDirectory()
        let killed = try writeThenKill(tmp.path, padding: false, unsyncedBatches: 1)
        let records = try readAllRecords(tmp.path)
        #expect(!records.contains { if case .padding = $0.record { return true }; return false })
        #expect(records.contains { if case .syncedThrough(let claim) = $0.record { return claim == UInt64(killed.syncedEnd) }; return false })
    }

    @Test func aCleanCloseVouchesForEverything() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert([makeSample(1)], fetchedAt: Date())
        try store.close()
        let records = try readAllRecords(tmp.path)
        guard case .syncedThrough(let claim)? = records.last?.record else { Issue.record("no closing record: \(records.map(\.record))"); return }
        #expect(claim == UInt64(records.last!.offset))
        // Reopening and closing again without writes writes nothing.
        let bytes = readFile(segmentFiles(tmp.path)[0])
        try StepLogStore.open(tmp.path).close()
        #expect(readFile(segmentFiles(tmp.path)[0]) == bytes)
    }

    @Test func damageInUnsyncedBytesIsDroppedEvenWithIntactRecordsAfterIt() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        let killed = try writeThenKill(reference)
        let name = (killed.newest as NSString).lastPathComponent
        let records = try readAllRecords(reference)
        let digests = prefixDigests(records)
        let unsynced = records.filter { $0.offset >= killed.syncedEnd }
        #expect(unsynced.count > 40)
        var rng = SeededGenerator(seed: 151)
        for trial in 0..<30 {
            try copyDirectory(reference, to: work)
            var bytes = readFile(work + "/" + name)
            // A lost or garbled sector (zeros or noise) anywhere in the unsynced bytes.
            let sector = Int(killed.syncedEnd) / 512 + Int.random(in: 0..<(Int(unsynced.last!.end) - Int(killed.syncedEnd)) / 512, using: &rng)
            let range = (sector * 512)..<min(bytes.count, sector * 512 + 512)
            for i in range { bytes[i] = trial % 2 == 0 ? 0 : UInt8.random(in: 0...255, using: &rng) }
            writeFile(work + "/" + name, bytes)
            let first = try #require(records.firstIndex { $0.end > Int64(range.lowerBound) })
            let store = try StepLogStore.open(work)
            // Reported as dropped, unless only zeros were left from there on
            // (which cannot be told from the writer's zero-filled space).
            let leftover = bytes[Int(records[first].offset)...].contains { $0 != 0 }
            #expect(store.openReport.tornTail?.offset == (leftover ? records[first].offset : nil), "trial \(trial)")
            #expect(try StoreDigest.of(store) == digests[first], "trial \(trial): exactly the records before the damage")
            #expect(records[first].offset >= killed.syncedEnd)
            try store.close()
            #expect(try StoreVerifier.verify(directory: work).problems.isEmpty)
        }
        // Cut exactly at the last sync: the acknowledged state, by the API's own account.
        try copyDirectory(reference, to: work)
        writeFile(work + "/" + name, Array(readFile(work + "/" + name).prefix(Int(killed.syncedEnd))))
        #expect(try StoreDigest.of(try StepLogStore.open(work, options: .fullReplayReadOnly)) == killed.acknowledged)
    }

    @Test func damageInBytesASyncAcknowledgedIsCorruption() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        let killed = try writeThenKill(reference)
        let name = (killed.newest as NSString).lastPathComponent
        let records = try readAllRecords(reference)
        let digests = prefixDigests(records)
        let vouched = records.enumerated().filter { $0.element.end <= killed.syncedEnd && $0.element.offset >= FormatConstants.dataStartV2 }
        var rng = SeededGenerator(seed: 152)
        for _ in 0..<20 {
            let (index, record) = vouched.randomElement(using: &rng)!
            try copyDirectory(reference, to: work)
            var bytes = readFile(work + "/" + name)
            bytes[Int(record.offset) + Int.random(in: 0..<record.size, using: &rng)] ^= 0x10
            writeFile(work + "/" + name, bytes)
            do {
                _ = try StepLogStore.open(work)
                Issue.record("damage at \(record.offset), before the last sync, was not reported")
            } catch let StepLogError.corruption(path, offset, kind) {
                #expect(path == work + "/" + name && offset == record.offset)
                // Damage vouched for by a synced-through record after it.
                guard case .damageInSyncedBytes(_, let vouchedBy) = kind else { Issue.record("\(kind)"); continue }
                #expect(vouchedBy > record.offset)
                #expect(kind.description.contains("in bytes a sync made durable (synced-through record at \(vouchedBy))"))
            }
            #expect(readFile(work + "/" + name) == bytes, "a refused open changes nothing")
            var salvage = StoreOptions()
            salvage.salvage = true
            let store = try StepLogStore.open(work, options: salvage)
            #expect(try StoreDigest.of(store) == digests[index])
            try store.close()
            if let aside = store.openReport.salvage?.setAsidePath { try? FileManager.default.removeItem(atPath: aside) }
        }
    }

    @Test func aTornFirstSectorNeverTakesTheHeader() throws {
        // The header has the first 4 KiB to itself: garbage over the first
        // sector of records (a torn first append) leaves it whole, and the
        // store opens, dropping the unsynced records.
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        try store.upsert((0..<50).map { makeSample($0) }, fetchedAt: Date())
        try store.writer!.flush()
        store.abandon()
        let path = segmentFiles(tmp.path)[0]
        var bytes = readFile(path)
        for i in 4096..<4608 { bytes[i] = UInt8(truncatingIfNeeded: i &* 31) }
        writeFile(path, bytes)
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.openReport.tornTail?.offset == 4096)
        #expect(reopened.counts.samples == 0)
        try reopened.upsert([makeSample(1)], fetchedAt: Date())
        try reopened.close()
        #expect(try StoreDigest.of(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)).samples.count == 1)
    }

    @Test func aTornSectorAfterAPaddedSyncLeavesTheAcknowledgedRecordsWhole() throws {
        // A disk without powersafe overwrite may garble a whole sector being
        // written. After a padded sync the next append starts a new sector, so
        // tearing it cannot reach what the sync acknowledged.
        for padding in [true, false] {
            let tmp = TemporaryDirectory()
            let killed = try writeThenKill(tmp.path, padding: padding, unsyncedBatches: 1)
            let path = killed.newest
            var bytes = readFile(path)
            let sector = Int(killed.syncedEnd) / 512 * 512 // the sector the first unsynced append wrote into
            for i in sector..<(sector + 512) { bytes[i] = 0xA5 }
            writeFile(path, bytes)
            let store = try StepLogStore.open(tmp.path)
            let digest = try StoreDigest.of(store)
            if padding {
                #expect(digest == killed.acknowledged, "with padding, the torn sector held only unsynced bytes")
            } else {
                // Without padding the same tear reaches into the last acknowledged
                // records (and the synced-through record that would have vouched
                // for them is torn too): acknowledged data is lost silently. This
                // is what padding is for.
                #expect(killed.syncedEnd % 512 != 0)
                #expect(digest != killed.acknowledged)
            }
            try store.close()
        }
    }

    @Test func aClaimPastTheFileVouchesForNoMoreThanTheFile() throws {
        // A checksummed synced-through record claiming more than the file
        // holds (forged or damaged; the fuzzer's claim was past Int64.max,
        // which trapped a writer's open) vouches for the whole file, no more.
        for claim in [UInt64.max, UInt64(Int64.max) + 1, UInt64(Int64.max), 1 << 40] {
            let tmp = TemporaryDirectory()
            let store = try StepLogStore.open(tmp.path)
            try store.upsert((0..<5).map { makeSample($0) }, fetchedAt: Date(timeIntervalSince1970: 1))
            try store.close()
            let expected = try StoreDigest.of(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly))
            let path = segmentFiles(tmp.path)[0]
            let record = WriteBuffer()
            _ = RecordFrame.append(type: .syncedThrough, to: record) { $0.append(claim) }
            writeFile(path, readFile(path) + Array(record.bytes))
            let bytes = readFile(path)

            let writer = try StepLogStore.open(tmp.path)
            #expect(writer.openReport.tornTail == nil, "claim \(claim)")
            #expect(try StoreDigest.of(writer) == expected, "claim \(claim)")
            try writer.close()
            // Vouched for as a whole: nothing re-written, nothing appended.
            #expect(readFile(path) == bytes, "claim \(claim)")
            #expect(try StoreDigest.of(try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))) == expected, "claim \(claim)")
        }
    }
}
