import Foundation
import Testing
@testable import StepLog

/// Replay-based recovery tests: write a known history, damage or cut it,
/// reopen, and compare with the model's state after the surviving prefix.
@Suite struct TruncationReplayTests {
    @Test func cutAtEveryByteOfTheNewestSegmentsLastEightKiB() throws {
        let tmp = TemporaryDirectory()
        // A history whose newest segment holds more than 8 KiB of records.
        // A history whose newest segment holds more than 8 KiB of records,
        // with every record type the writer writes in its last 8 KiB.
        let wanted = Set(RecordType.allCases).subtracting([.intervalsCleared])
        func typesInLastEightKiB(_ dir: String) -> Set<RecordType> {
            let records = (try? readAllRecords(dir)) ?? []
            let newest = records.last?.segmentIndex ?? 0
            let end = records.last?.end ?? 0
            return Set(records.filter { $0.segmentIndex == newest && $0.end > end - 8_192 }.map(\.record.type))
        }
        let history = try ReferenceHistory(in: tmp, segmentSize: 16 << 10, batches: 1_000, seed: 1) { store in
            let infos = store.segmentInfos
            return infos.count >= 3 && infos.last!.size > 4_096 + 8_192 + 1_024 && typesInLastEightKiB(store.directory) == wanted
        }
        let (reference, work, records, digests, files) = (history.reference, history.work, history.records, history.digests, history.files)
        #expect(files.count >= 2)
        let newest = files.last!
        let newestIndex = files.count - 1
        let bytes = readFile(newest)
        let dataStart = FormatConstants.dataStartV2
        #expect(bytes.count - dataStart > 8_192, "the newest segment's records should exceed 8 KiB for this test to mean something")

        try copyDirectory(reference, to: work)
        let workNewest = work + "/" + (newest as NSString).lastPathComponent
        let before = records.filter { $0.segmentIndex < newestIndex }.count
        let inNewest = records.filter { $0.segmentIndex == newestIndex }
        // The cuts meet every record type the writer writes.
        let types = Set(inNewest.filter { $0.end > Int64(bytes.count - 8_192) }.map(\.record.type))
        #expect(types == wanted, "\(types)")
        // No zero-filled space ahead of the writer: 8,000 opens would otherwise
        // each write and sync 8 MiB of zeros (64 GB), which this test is not about.
        var options = StoreOptions(segmentSize: 16 << 10)
        options.preallocationSize = 0
        var torn = 0, clean = 0
        for cut in max(dataStart, bytes.count - 8_192)...bytes.count {
            writeFile(workNewest, Array(bytes[0..<cut]))
            let store = try StepLogStore.open(work, options: options)
            let survivors = before + inNewest.filter { $0.end <= Int64(cut) }.count
            let digest = try StoreDigest.of(store)
            if digest != digests[survivors] {
                Issue.record("cut at \(cut): recovered \(digest), expected \(digests[survivors]) (prefix of \(survivors) records)")
                break
            }
            let boundary = inNewest.last { $0.end <= Int64(cut) }?.end ?? Int64(FormatConstants.dataStartV2)
            // What a torn tail drops is its bytes up to the last non-zero one: zero
            // bytes at the very end cannot be told from the writer's zero-filled space.
            let lastNonZero = cut > Int(boundary) ? bytes[Int(boundary)..<cut].lastIndex { $0 != 0 } : nil
            if let lastNonZero {
                #expect(store.openReport.tornTail?.offset == boundary)
                #expect(store.openReport.tornTail?.bytesDropped == Int64(lastNonZero + 1) - boundary)
                // Gone before any append: only zero-filled space may follow the boundary.
                #expect(readFile(workNewest).dropFirst(Int(boundary)).allSatisfy { $0 == 0 }, "the torn tail must be truncated before any append")
                torn += 1
            } else {
                #expect(store.openReport.tornTail == nil)
                clean += 1
            }
            try store.close()
            // A torn tail is truncated; zero bytes after the last record are zero-filled
            // space, which only a preallocating writer trims (here preallocation is off).
            #expect(readFile(workNewest).count == (lastNonZero == nil ? cut : Int(boundary)))
        }
        // Both outcomes were met, many times (cuts between records, and inside them).
        #expect(torn > 1_000 && clean > 10, "\(torn) cuts left an unsynced tail, \(clean) did not")
    }

    @Test func writingContinuesAfterATornTail() throws {
        let tmp = TemporaryDirectory()
        try writeKnownHistory(tmp.path, segmentSize: 1 << 20, batches: 40, seed: 2)
        let newest = segmentFiles(tmp.path).last!
        var bytes = readFile(newest)
        bytes.removeLast(5)
        writeFile(newest, bytes)
        let expected: StoreDigest
        do {
            let store = try StepLogStore.open(tmp.path)
            #expect(store.openReport.tornTail != nil)
            try store.upsert([makeSample(9_999_999)], fetchedAt: Date())
            try store.sync()
            expected = try StoreDigest.of(store)
            try store.close()
        }
        let reopened = try StepLogStore.open(tmp.path)
        #expect(reopened.openReport.tornTail == nil)
        #expect(try StoreDigest.of(reopened) == expected)
    }

    @Test func cutsInSealedSegmentsAreCorruptionOrSalvagedToThePrefix() throws {
        let tmp = TemporaryDirectory()
        let history = try ReferenceHistory(in: tmp, segmentSize: 16 << 10, batches: 150, seed: 3)
        let (reference, work, records, digests, files) = (history.reference, history.work, history.records, history.digests, history.files)
        var rng = SeededGenerator(seed: 33)
        for _ in 0..<40 {
            let segmentIndex = Int.random(in: 0..<(files.count - 1), using: &rng)
            let name = (files[segmentIndex] as NSString).lastPathComponent
            let size = readFile(files[segmentIndex]).count
            let cut = Int.random(in: FormatConstants.dataStartV2..<size, using: &rng)
            try copyDirectory(reference, to: work)
            writeFile(work + "/" + name, Array(readFile(files[segmentIndex])[0..<cut]))
            let end = try SegmentHeaderProbe.base(files[segmentIndex]) + UInt64(cut)
            let next = try SegmentHeaderProbe.base(files[segmentIndex + 1])
            #expect(next - end == UInt64(size - cut))
            #expect(throws: StepLogError.corruption(path: work + "/" + name, offset: Int64(cut), kind: .chain(.gap(end: end, next: next)))) {
                _ = try StepLogStore.open(work)
            }
            var salvage = StoreOptions()
            salvage.salvage = true
            let store = try StepLogStore.open(work, options: salvage)
            let survivors = records.filter { $0.segmentIndex < segmentIndex || ($0.segmentIndex == segmentIndex && $0.end <= Int64(cut)) }.count
            #expect(try StoreDigest.of(store) == digests[survivors])
            let salvaged = try #require(store.openReport.salvage)
            #expect(salvaged.segmentsDropped == files.count - 1 - segmentIndex)
            #expect(readFile(try #require(salvaged.setAsidePath)).count == Int(salvaged.bytesDropped))
            try store.close()
            try? FileManager.default.removeItem(atPath: salvaged.setAsidePath!)
            // The salvaged store opens cleanly afterwards.
            let again = try StepLogStore.open(work)
            #expect(again.openReport.salvage == nil && again.openReport.tornTail == nil)
            #expect(try StoreDigest.of(again) == digests[survivors])
            try again.close()
        }
    }
}

/// Reads a segment header's base position (test helper).
enum SegmentHeaderProbe {
    static func base(_ path: String) throws -> UInt64 {
        let bytes = readFile(path)
        return try bytes.withUnsafeBytes { try SegmentHeader.decode($0).get().basePosition }
    }
}

@Suite struct CorruptionReplayTests {
    @Test func bitFlipsInsideRecordsAreFoundWhereTheyAre() throws {
        let tmp = TemporaryDirectory()
        let history = try ReferenceHistory(in: tmp, segmentSize: 16 << 10, batches: 150, seed: 4)
        let (reference, work, records, digests, files) = (history.reference, history.work, history.records, history.digests, history.files)
        let newestIndex = files.count - 1
        var rng = SeededGenerator(seed: 44)
        let middle = records.enumerated().filter { $0.element.segmentIndex == newestIndex / 2 }
        let tail = records.enumerated().filter { $0.element.segmentIndex == newestIndex }
        var picks = (0..<25).map { _ in middle.randomElement(using: &rng)! } + (0..<25).map { _ in tail.randomElement(using: &rng)! }
        picks.append(tail.last!)
        for (number, record) in picks {
            try copyDirectory(reference, to: work)
            let path = work + "/" + (record.segment as NSString).lastPathComponent
            var bytes = readFile(path)
            let byte = Int(record.offset) + Int.random(in: 0..<record.size, using: &rng)
            bytes[byte] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
            writeFile(path, bytes)
            let isLastRecord = number == records.count - 1
            if isLastRecord {
                // Indistinguishable from a torn write: dropped and reported.
                let store = try StepLogStore.open(work, options: .fullReplay)
                #expect(store.openReport.tornTail?.offset == record.offset)
                #expect(try StoreDigest.of(store) == digests[number])
                try store.close()
                continue
            }
            do {
                _ = try StepLogStore.open(work, options: .fullReplay)
                Issue.record("flip at byte \(byte) of \(path) (record at \(record.offset)) was not reported")
            } catch let StepLogError.corruption(errorPath, offset, kind) {
                #expect(errorPath == path)
                #expect(offset == record.offset, "\(kind)")
                switch kind {
                case .damage, .damageInSyncedBytes: break // vouched for, in the newest segment, by a later synced-through record
                default: Issue.record("a flipped bit is damage to the record's frame, not \(kind)")
                }
            }
            var salvage = StoreOptions.fullReplay
            salvage.salvage = true
            let store = try StepLogStore.open(work, options: salvage)
            #expect(store.openReport.salvage?.offset == record.offset)
            #expect(try StoreDigest.of(store) == digests[number], "salvage must keep exactly the records before the damage")
            try store.close()
            if let aside = store.openReport.salvage?.setAsidePath { try? FileManager.default.removeItem(atPath: aside) }
        }
    }

    @Test func damagedHeadersAndMissingSegments() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference")
        try writeKnownHistory(reference, segmentSize: 8 << 10, batches: 60, seed: 5)
        let files = segmentFiles(reference).map { ($0 as NSString).lastPathComponent }
        #expect(files.count >= 4)
        let work = tmp.sub("work")
        // A flipped bit in a header.
        for byte in [0, 9, 15, 25, 37] {
            try copyDirectory(reference, to: work)
            var bytes = readFile(work + "/" + files[1])
            bytes[byte] ^= 0x10
            writeFile(work + "/" + files[1], bytes)
            // A flipped magic byte is no StepLog segment; any other flip breaks the header's checksum.
            let kind: StepLogError.CorruptionKind = .segmentHeader(byte < 8 ? .badMagic : .checksumMismatch)
            #expect(throws: StepLogError.corruption(path: work + "/" + files[1], offset: 0, kind: kind)) {
                _ = try StepLogStore.open(work, options: .fullReplay)
            }
        }
        // A missing middle segment.
        try copyDirectory(reference, to: work)
        try FileManager.default.removeItem(atPath: work + "/" + files[2])
        #expect(throws: StepLogError.corruption(path: work + "/" + files[2], offset: 0,
                                                kind: .chain(.missing(name: files[2], from: 2, to: 4)))) {
            _ = try StepLogStore.open(work, options: .fullReplay)
        }
    }

    /// Segments no writer continues, refused by readers and writers alike (both
    /// found by fuzzing store-open; reproducers in Tests/Fuzz/corpus/store-open/):
    /// the last sequence number (a writer's open of it trapped), and a version 1
    /// segment at maxSequence (a writer continues it in a new segment, numbered
    /// past what any open accepted).
    @Test(arguments: [
        (UInt64.max, FormatConstants.formatVersion, SegmentHeader.Problem.sequenceAfterLast(UInt64.max),
         "sequence \(UInt64.max) is the last there is: no segment can follow it"),
        (FormatConstants.maxSequence, UInt16(1), SegmentHeader.Problem.sealedAtLastSequence(FormatConstants.maxSequence),
         "segment numbered \(FormatConstants.maxSequence) takes no more records and no segment can follow it"),
    ])
    func segmentsNoWriterCanContinueAreRefusedByReadersAndWritersAlike(sequence: UInt64, version: UInt16, problem: SegmentHeader.Problem,
                                                                         reason: String) throws {
        let tmp = TemporaryDirectory()
        let name = SegmentName.fileName(sequence: sequence)
        let header = SegmentHeader(sequence: sequence, basePosition: 0, version: version)
        writeFile(tmp.path + "/" + name, version == 1 ? header.encoded() : header.encodedBlock())
        let refusal = StepLogError.corruption(path: tmp.path + "/" + name, offset: Int64(FormatConstants.headerSequenceOffset),
                                              kind: .segmentHeader(problem))
        #expect(problem.description == reason)
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true)) }
        #expect(throws: refusal) { _ = try StepLogStore.open(tmp.path) }
    }

    @Test func aWriterNeverNumbersASegmentPastTheLastUsableNumber() throws {
        // A version 2 store at maxSequence opens for writing; a roll past it is
        // refused in one line, and what was acknowledged before still opens.
        let tmp = TemporaryDirectory()
        let name = SegmentName.fileName(sequence: FormatConstants.maxSequence)
        writeFile(tmp.path + "/" + name, SegmentHeader(sequence: FormatConstants.maxSequence, basePosition: 0).encodedBlock())
        var options = StoreOptions(segmentSize: 8 << 10, createIfMissing: false)
        options.preallocationSize = 0
        options.writeSnapshots = false
        var acknowledged = 0
        do {
            let store = try StepLogStore.open(tmp.path, options: options)
            #expect(throws: StepLogError.sequencesExhausted(path: tmp.path + "/" + SegmentName.fileName(sequence: .max))) {
                for n in 0..<1_000 {
                    try store.upsert([makeSample(UInt64(n))], fetchedAt: Date())
                    acknowledged = n + 1
                }
            }
            #expect(acknowledged > 0 && acknowledged < 1_000)
        }
        let reopened = try StepLogStore.open(tmp.path, options: StoreOptions(readOnly: true))
        #expect(reopened.counts.samples == acknowledged)
    }

    @Test func randomDamageNeverCrashesAndSalvageKeepsAnExactPrefix() throws {
        let tmp = TemporaryDirectory()
        let history = try ReferenceHistory(in: tmp, segmentSize: 16 << 10, batches: 100, seed: 6)
        let (reference, work, records, digests, files) = (history.reference, history.work, history.records, history.digests, history.files)
        var rng = SeededGenerator(seed: 66)
        for _ in 0..<60 {
            try copyDirectory(reference, to: work)
            let index = Int.random(in: 0..<files.count, using: &rng)
            let path = work + "/" + (files[index] as NSString).lastPathComponent
            var bytes = readFile(path)
            let start = Int.random(in: FormatConstants.dataStartV2..<bytes.count, using: &rng)
            let length = Int.random(in: 1...64, using: &rng)
            for i in start..<min(bytes.count, start + length) { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
            writeFile(path, bytes)
            // The first record touched by the damage, in log order.
            let firstDamaged = records.firstIndex {
                $0.segmentIndex == index && $0.end > Int64(start) && $0.offset < Int64(start + length)
            } ?? records.count
            var salvage = StoreOptions.fullReplay
            salvage.salvage = true
            let store = try StepLogStore.open(work, options: salvage)
            let digest = try StoreDigest.of(store)
            // Random bytes may happen to rewrite a record identically; then nothing is damaged.
            if store.openReport.salvage == nil && store.openReport.tornTail == nil {
                #expect(digest == digests[records.count])
            } else {
                #expect(digest == digests[firstDamaged])
            }
            try store.close()
            if let aside = store.openReport.salvage?.setAsidePath { try? FileManager.default.removeItem(atPath: aside) }
        }
    }
}

/// Small stores are replayed without the reader thread (the pipeline reads
/// every segment on the calling thread first). Both ways must open a store
/// to the same state and report, or fail with the same error.
@Suite struct ReplayReaderThreadTests {
    /// What an open gives, comparable across the two ways (not its duration).
    func outcome(_ dir: String, _ options: StoreOptions) -> Result<(StoreDigest, OpenReport), StepLogError> {
        do {
            let store = try StepLogStore.open(dir, options: options)
            defer { try? store.close() }
            var report = store.openReport
            report.seconds = 0
            return .success((try StoreDigest.of(store), report))
        } catch let error as StepLogError {
            return .failure(error)
        } catch {
            Issue.record("unexpected error \(error)")
            return .failure(.closed(path: dir))
        }
    }

    @Test func onTheCallingThreadAndOnAReaderThreadAStoreOpensAlike() throws {
        let tmp = TemporaryDirectory()
        let reference = tmp.sub("reference"), work = tmp.sub("work")
        _ = try writeKnownHistory(reference, segmentSize: 16 << 10, batches: 120, seed: 12)
        let files = segmentFiles(reference)
        #expect(files.count >= 5)
        var rng = SeededGenerator(seed: 13)
        // Each case damages one segment of a copy: not at all, a cut in the
        // newest (a torn tail), a flipped byte in a sealed one (corruption).
        var damages: [(what: String, segment: Int, damage: ([UInt8]) -> [UInt8])] = [("no damage", files.count - 1, { $0 })]
        for _ in 0..<6 {
            let cut = Int.random(in: FormatConstants.dataStartV2..<readFile(files.last!).count, using: &rng)
            damages.append(("cut at \(cut) of the newest", files.count - 1, { Array($0[0..<cut]) }))
            let sealed = Int.random(in: 0..<(files.count - 1), using: &rng)
            let at = Int.random(in: FormatConstants.dataStartV2..<readFile(files[sealed]).count, using: &rng)
            damages.append(("byte \(at) of sealed segment \(sealed) flipped", sealed, { var b = $0; b[at] ^= 0x40; return b }))
        }
        var salvage = StoreOptions()
        salvage.salvage = true
        var outcomes = 0
        for (what, segment, damage) in damages {
            for base in [StoreOptions(readOnly: true), .fullReplayReadOnly, StoreOptions(), salvage] {
                var results: [Result<(StoreDigest, OpenReport), StepLogError>] = []
                for inlineBytes in [0, Int64.max] {
                    try? FileManager.default.removeItem(atPath: work)
                    try copyDirectory(reference, to: work)
                    writeFile(work + "/" + (files[segment] as NSString).lastPathComponent, damage(readFile(files[segment])))
                    var options = base
                    options.replayInlineBytes = inlineBytes
                    results.append(outcome(work, options))
                    if case .success(let (_, report)) = results.last, let aside = report.salvage?.setAsidePath {
                        try? FileManager.default.removeItem(atPath: aside)
                    }
                }
                switch (results[0], results[1]) {
                case (.success(let threaded), .success(let inline)):
                    #expect(threaded.0 == inline.0, "\(what): different contents")
                    #expect(threaded.1 == inline.1, "\(what): different reports")
                    #expect(threaded.1.records > 0 || threaded.1.segmentsFromSnapshots > 0, "\(what): nothing replayed")
                    outcomes += 1
                case (.failure(let threaded), .failure(let inline)):
                    #expect(threaded == inline, "\(what): different errors")
                default:
                    Issue.record("\(what): one way opens, the other fails: \(results[0]) vs \(results[1])")
                }
            }
        }
        #expect(outcomes > damages.count, "most cases should open")
    }
}

extension StoreOptions {
    /// Opening by replaying every record, ignoring index snapshots: what the
    /// corruption tests exercise (a valid snapshot lets open skip a segment).
    static var fullReplay: StoreOptions {
        var o = StoreOptions()
        o.useSnapshots = false
        return o
    }

    static var fullReplayReadOnly: StoreOptions {
        var o = fullReplay
        o.readOnly = true
        return o
    }
}
