import Foundation
import Testing
@testable import StepLog

/// The replay harness extended to deletions (#12): seeded random
/// interleavings of upsert (new, changed, identical, relabelled, revived),
/// delete (live, deleted, unknown), sync, markSynced, markRejected,
/// markDeletionsAcknowledged, unacknowledge (with and without a reason),
/// deletions restored, destinations, source anchors, compaction, reopen, and a
/// simulated kill (everything after the last sync may be lost: cut at a
/// random point, or a sector of it zeroed or garbled).
///
/// Two independent models check the store: an operation model (what the API
/// promises: every summary and, after every operation, every live sample,
/// pending deletion and anchor) and, after a kill, the record model applied
/// to exactly the records that survived, which must include everything up to
/// the last sync.
@Suite struct ModelReplayTests {
    /// What the API promises, as plain dictionaries.
    struct OperationModel: Equatable {
        enum Entry: Equatable { case live(StepSample, synced: Bool), deleted(at: Int64) }
        var samples: [UUID: Entry] = [:]
        var anchors: [UInt64: [UInt8]] = [:]
        /// Live, unsynced samples whose current version the server rejected, with the reason.
        var rejected: [UUID: String] = [:]
        var destinations: [StoreDestination] = []

        init() {}

        init(_ d: StoreDigest) {
            destinations = d.destinations
            for s in d.samples { samples[UUID(uuidString: s.id)!] = .live(s.sample, synced: s.synced) }
            for x in d.deletions { samples[UUID(uuidString: x.id)!] = .deleted(at: x.deletedAt) }
            anchors = d.anchors
            for (id, reason) in d.rejected { rejected[UUID(uuidString: id)!] = reason }
        }

        var digest: StoreDigest {
            var d = StoreDigest()
            for (id, e) in samples {
                switch e {
                case .live(let s, let synced): d.samples.append(.init(id: id.uuidString, sample: s, synced: synced))
                case .deleted(let at): d.deletions.append(.init(id: id.uuidString, deletedAt: at))
                }
            }
            d.samples.sort()
            d.deletions.sort()
            d.anchors = anchors
            for (id, reason) in rejected { d.rejected[id.uuidString] = reason }
            d.destinations = destinations
            return d
        }

        var live: [UUID] { samples.filter { if case .live = $0.value { return true }; return false }.map(\.key).sorted { $0.uuidString < $1.uuidString } }
        var deleted: [UUID] { samples.filter { if case .deleted = $0.value { return true }; return false }.map(\.key).sorted { $0.uuidString < $1.uuidString } }

        mutating func upsert(_ s: StepSample, into summary: inout UpsertSummary) {
            switch samples[s.id] {
            case nil: summary.inserted += 1; samples[s.id] = .live(s, synced: false)
            case .deleted: summary.revived += 1; samples[s.id] = .live(s, synced: false)
            case .live(let old, let synced):
                var a = old, b = s
                a.origin = .unspecified
                b.origin = .unspecified
                if a != b { summary.updated += 1; samples[s.id] = .live(s, synced: false) }
                else if old.origin != s.origin { summary.relabeled += 1; samples[s.id] = .live(s, synced: synced) }
                else { summary.unchanged += 1; return } // nothing written: a rejection still holds
            }
            rejected[s.id] = nil // a new version: sent again
        }

        mutating func delete(_ id: UUID, at: Int64, into summary: inout DeleteSummary) {
            switch samples[id] {
            case nil: summary.unknown += 1
            case .deleted: summary.alreadyDeleted += 1
            case .live: summary.deleted += 1; samples[id] = .deleted(at: at); rejected[id] = nil
            }
        }
    }

    struct Harness {
        let dir: String
        var options: StoreOptions
        var rng: SeededGenerator
        var store: StepLogStore
        var current = OperationModel()
        var acknowledged = OperationModel()
        /// The newest segment when `acknowledged` was taken: a roll since then
        /// made more durable (sealing syncs) than the API acknowledged.
        var acknowledgedIn: String?
        var nextID: UInt64 = 0
        var clock: Int64 = 1_000
        var counts: [String: Int] = [:]
        var segmentsSeen: Set<UInt64> = []

        init(dir: String, seed: UInt64, padding: Bool) throws {
            self.dir = dir
            options = StoreOptions(segmentSize: 8 << 10)
            options.padSyncsToSector = padding
            rng = SeededGenerator(seed: seed)
            store = try StepLogStore.open(dir, options: options)
        }

        mutating func pick<T>(_ items: [T]) -> T? { items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &rng)] }

        mutating func sample(_ id: UUID, _ n: UInt64) -> StepSample {
            StepSample(id: id, startMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000, endMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000 + 30_000,
                       count: Int.random(in: 0...500, using: &rng), sourceBundleId: "com.apple.health",
                       sourceDeviceName: Bool.random(using: &rng) ? "Watch" : nil, origin: SampleOrigin.allCases.randomElement(using: &rng)!)
        }

        mutating func step() throws {
            clock += 1
            let roll = Int.random(in: 0..<100, using: &rng)
            switch roll {
            case 0..<23: try upsert()
            case 23..<26: try unacknowledge()
            case 26..<28: try restoreDeletions()
            case 28..<30: try destination()
            case 30..<45: try delete()
            case 45..<60: try sync()
            case 60..<66: try markSynced()
            case 66..<68: try reject()
            case 68..<76: try acknowledgeDeletions()
            case 76..<80: try anchor()
            case 80..<83: try compact()
            case 83..<90: try reopen()
            default: try kill()
            }
            #expect(try StoreDigest.of(store) == current.digest, "after \(counts)")
            #expect(store.destination == current.destinations.last, "the current destination is the latest recorded")
            for segment in store.segmentInfos { segmentsSeen.insert(segment.sequence) }
            let c = store.counts
            let live = current.samples.values.filter { if case .live = $0 { return true }; return false }
            #expect(c.samples == live.count && c.pendingDeletions == current.samples.count - live.count)
            #expect(c.unsyncedSamples + c.rejectedSamples == live.filter { if case .live(_, false) = $0 { return true }; return false }.count)
            #expect(c.rejectedSamples == current.rejected.count)
        }

        mutating func upsert() throws {
            var batch: [StepSample] = []
            for _ in 0..<Int.random(in: 1...10, using: &rng) {
                switch Int.random(in: 0..<5, using: &rng) {
                case 0:
                    nextID += 1
                    batch.append(sample(.test(nextID), nextID))
                case 1: // changed, or identical, or relabelled
                    guard let id = pick(current.live), case .live(let old, _)? = current.samples[id] else { continue }
                    var s = old
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: s.count += 1
                    case 1: s.origin = SampleOrigin.allCases.randomElement(using: &rng)!
                    default: break
                    }
                    batch.append(s)
                case 2: // revive
                    guard let id = pick(current.deleted) else { continue }
                    batch.append(sample(id, UUIDBytes(id).low & 0xFFFF))
                case 3: // identical
                    guard let id = pick(current.live), case .live(let old, _)? = current.samples[id] else { continue }
                    batch.append(old)
                default: // a UUID whose deletion was acknowledged: new again
                    guard nextID > 0 else { continue }
                    let id = UUID.test(UInt64.random(in: 1...nextID, using: &rng))
                    guard current.samples[id] == nil else { continue }
                    batch.append(sample(id, 7))
                }
            }
            var expected = UpsertSummary()
            for s in batch { current.upsert(s, into: &expected) }
            #expect(try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: Double(clock))) == expected)
            counts["upsert", default: 0] += 1
        }

        mutating func delete() throws {
            var ids: [UUID] = []
            for _ in 0..<Int.random(in: 1...5, using: &rng) {
                switch Int.random(in: 0..<4, using: &rng) {
                case 0, 1: if let id = pick(current.live) { ids.append(id) }
                case 2: if let id = pick(current.deleted) { ids.append(id) }
                default: ids.append(.test(UInt64.random(in: 1...(nextID + 5), using: &rng)))
                }
            }
            var expected = DeleteSummary()
            for id in ids { current.delete(id, at: clock * 1_000, into: &expected) }
            #expect(try store.delete(ids, at: Date(timeIntervalSince1970: Double(clock))) == expected)
            counts["delete", default: 0] += 1
        }

        mutating func sync() throws {
            try store.sync()
            acknowledged = current
            acknowledgedIn = store.writer?.info.path
            counts["sync", default: 0] += 1
        }

        mutating func markSynced() throws {
            let batch = try store.unsyncedSamples(limit: Int.random(in: 1...15, using: &rng))
            for s in batch {
                guard case .live(let sample, false)? = current.samples[s.id], sample == s.sample, current.rejected[s.id] == nil else {
                    Issue.record("unsyncedSamples returned \(s.id), which the model does not hold unsynced (and not rejected)")
                    continue
                }
                current.samples[s.id] = .live(sample, synced: true)
            }
            #expect(try store.markSynced(batch) == batch.count)
            counts["markSynced", default: 0] += 1
        }

        /// The server refuses a few of the next unsynced samples: kept, not offered again.
        mutating func reject() throws {
            let batch = try store.unsyncedSamples(limit: Int.random(in: 1...4, using: &rng))
            let reasons = batch.map { "count: refused at \(clock) (\($0.sample.count))" }
            for (s, reason) in zip(batch, reasons) { current.rejected[s.id] = reason }
            #expect(try store.markRejected(Array(zip(batch, reasons)), at: Date(timeIntervalSince1970: Double(clock))) == batch.count)
            #expect(try store.unsyncedSamples(limit: 100).allSatisfy { current.rejected[$0.id] == nil })
            counts["reject", default: 0] += 1
        }

        /// The server turned out not to hold some acknowledged samples (sent
        /// again), or another uploader's version of them (held back, with a
        /// reason); a rejected sample's rejection ends.
        mutating func unacknowledge() throws {
            var chosen: [(sample: StoredSample, reason: String?)] = []
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                guard let id = pick(current.live), case .live(_, let synced)? = current.samples[id],
                      let stored = try store.sample(id: id), !chosen.contains(where: { $0.sample.id == id }) else { continue }
                if current.rejected[id] != nil {
                    chosen.append((stored, nil))
                } else if synced {
                    chosen.append((stored, Bool.random(using: &rng) ? "held by another uploader at \(clock)" : nil))
                } else {
                    continue // unsynced and not rejected, without a reason: nothing to change
                }
            }
            for (stored, reason) in chosen {
                guard case .live(let s, _)? = current.samples[stored.id] else { continue }
                current.samples[stored.id] = .live(s, synced: false)
                current.rejected[stored.id] = reason
            }
            #expect(try store.unacknowledge(chosen, at: Date(timeIntervalSince1970: Double(clock))) == chosen.count)
            counts["unacknowledge", default: 0] += 1
        }

        /// Deletions the server lost: UUIDs the store no longer holds become pending deletions again.
        mutating func restoreDeletions() throws {
            var ids: [UUID] = []
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                let id = Bool.random(using: &rng) ? pick(current.live) : .test(UInt64.random(in: 1...(nextID + 5), using: &rng))
                if let id, !ids.contains(id) { ids.append(id) }
            }
            var written = 0
            for id in ids where current.samples[id] == nil {
                current.samples[id] = .deleted(at: clock * 1_000)
                written += 1
            }
            #expect(try store.restoreDeletions(ids, at: Date(timeIntervalSince1970: Double(clock))) == written)
            counts["restoreDeletions", default: 0] += 1
        }

        mutating func destination() throws {
            let server = ["A", "B", "C"].randomElement(using: &rng)!
            let d = StoreDestination(serverId: "server-\(server)", user: Bool.random(using: &rng) ? "alice" : "bob",
                                     url: "http://127.0.0.1:\(8000 + Int(clock % 7))", uploader: .test(99),
                                     recordedAtMilliseconds: clock * 1_000, provenEqualAtMilliseconds: Bool.random(using: &rng) ? clock * 1_000 : 0)
            try store.recordDestination(d)
            current.destinations.removeAll { $0.isSame(as: d) }
            current.destinations.append(d)
            counts["destination", default: 0] += 1
        }

        mutating func acknowledgeDeletions() throws {
            let batch = try store.pendingDeletions(limit: Int.random(in: 1...8, using: &rng))
            for d in batch {
                guard case .deleted(let at)? = current.samples[d.id], at == d.deletedAtMilliseconds else {
                    Issue.record("pendingDeletions returned \(d.id), which the model does not hold deleted")
                    continue
                }
                current.samples[d.id] = nil
            }
            #expect(try store.markDeletionsAcknowledged(batch) == batch.count)
            counts["acknowledgeDeletions", default: 0] += 1
        }

        mutating func anchor() throws {
            let family = ["export", "mock", "live"].randomElement(using: &rng)!
            let anchor = (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            try store.recordSourceAnchor(family: family, anchor: anchor)
            current.anchors[SourceFamily.fingerprint(family)] = anchor
            counts["anchor", default: 0] += 1
        }

        /// Closes (which syncs), reopens with snapshots or by full replay, and checks.
        mutating func reopen() throws {
            try store.close()
            acknowledged = current
            try open()
            counts["reopen", default: 0] += 1
        }

        mutating func open() throws {
            var o = options
            o.useSnapshots = Bool.random(using: &rng)
            store = try StepLogStore.open(dir, options: o)
            #expect(store.openReport.salvage == nil)
            acknowledgedIn = store.writer?.info.path
        }

        mutating func compact() throws {
            try store.close()
            acknowledged = current
            let report = try StepLogStore.compact(directory: dir, options: options)
            #expect(report.after.deadBytes == 0)
            try open()
            #expect(try StoreVerifier.verify(directory: dir).problems.isEmpty)
            counts["compact", default: 0] += 1
        }

        /// The writer dies: what it appended since its last sync reached the
        /// file, and a power loss then loses a random suffix of it, or a sector
        /// of it is zeroed or garbled while the bytes after it survive.
        mutating func kill() throws {
            let w = store.writer!
            try w.flush()
            let newest = w.info.path
            let rolledSinceSync = newest != acknowledgedIn
            let syncedEnd = Int(w.syncedSize)
            store.abandon()
            let records = try readAllRecords(dir)
            let inNewest = records.filter { $0.segment == newest }
            let dataEnd = Int(inNewest.last?.end ?? Int64(FormatConstants.dataStartV2))
            let original = readFile(newest)
            var bytes = original
            let damage: Int
            switch Int.random(in: 0..<3, using: &rng) {
            case 0:
                damage = Int.random(in: syncedEnd...dataEnd, using: &rng)
                bytes = Array(bytes.prefix(damage))
            default:
                guard dataEnd > syncedEnd else { damage = dataEnd; break }
                let sector = Int.random(in: syncedEnd..<dataEnd, using: &rng) / 512 * 512
                let garble = Bool.random(using: &rng)
                for i in max(sector, syncedEnd)..<min(bytes.count, sector + 512) {
                    bytes[i] = garble ? UInt8.random(in: 0...255, using: &rng) : 0
                }
                // Where the bytes really changed (zeros over zeros change nothing).
                damage = zip(original, bytes).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? bytes.count
            }
            writeFile(newest, bytes)
            // The records before the first damaged one survive: every record of
            // earlier segments, and in the newest all those ending before the damage.
            let survivors = records.filter { $0.segment != newest || $0.end <= Int64(damage) }
            #expect(survivors.count >= records.filter { $0.segment != newest || $0.end <= Int64(syncedEnd) }.count)
            var model = RecordModel()
            for r in survivors { model.apply(r.record) }
            try open()
            let digest = try StoreDigest.of(store)
            #expect(digest == model.digest, "kill: the store must hold exactly the records before the damage")
            if damage == syncedEnd && !rolledSinceSync {
                #expect(digest == acknowledged.digest, "kill cut at the last sync: the acknowledged state")
                counts["kill at the last sync", default: 0] += 1
            }
            if damage < dataEnd { counts["kill that lost records", default: 0] += 1 }
            #expect(try StoreVerifier.verify(directory: dir).problems.isEmpty)
            current = OperationModel(digest)
            acknowledged = current
            counts["kill", default: 0] += 1
        }
    }

    @Test(arguments: [(UInt64(1), true), (2, false), (3, true)])
    func randomInterleavingsAgreeWithBothModels(seed: UInt64, padding: Bool) throws {
        let tmp = TemporaryDirectory()
        var h = try Harness(dir: tmp.path, seed: seed, padding: padding)
        for _ in 0..<600 { try h.step() }
        try h.store.close()
        #expect(try StoreDigest.of(try StepLogStore.open(tmp.path, options: .fullReplayReadOnly)) == h.current.digest)
        // Every kind of step ran, several times.
        for kind in ["upsert", "delete", "sync", "markSynced", "reject", "acknowledgeDeletions", "anchor", "compact", "reopen", "kill",
                     "unacknowledge", "restoreDeletions", "destination",
                     "kill at the last sync", "kill that lost records"] {
            #expect(h.counts[kind, default: 0] >= 5, "\(kind) ran \(h.counts[kind, default: 0]) times")
        }
        #expect(h.segmentsSeen.count >= 20, "segments rolled and compacted: \(h.segmentsSeen.count) sequence numbers")
        print("model replay, seed \(seed): \(h.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")); \(h.segmentsSeen.count) segments; \(h.current.samples.count) UUIDs at the end")
    }
}
