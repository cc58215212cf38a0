import Foundation
import Testing
@testable import StepLog
@_exported import StepTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension UUID {
    /// A UUID built from two numbers, for readable deterministic test data.
    static func test(_ a: UInt64, _ b: UInt64 = 0) -> UUID {
        UUIDBytes(high: 0x1000_0000_0000_0000 | a, low: 0x8000_0000_0000_0000 | b).uuid
    }
}

func makeSample(_ n: UInt64, start: Int64 = 1_700_000_000_000, count: Int = 42,
                bundle: String = "com.apple.health", device: String? = "iPhone", origin: SampleOrigin = .unspecified) -> StepSample {
    StepSample(id: .test(n), startMilliseconds: start + Int64(n) * 60_000, endMilliseconds: start + Int64(n) * 60_000 + 30_000,
               count: count, sourceBundleId: bundle, sourceDeviceName: device, origin: origin)
}

func segmentFiles(_ dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [])
        .filter { $0.hasSuffix(".log") }.sorted().map { dir + "/" + $0 }
}

/// Everything a store means, as comparable values (the replay tests compare
/// a reopened store with an independent model through this).
struct StoreDigest: Equatable, CustomStringConvertible {
    struct Sample: Equatable, Comparable {
        var id: String
        var sample: StepSample
        var synced: Bool
        static func < (a: Sample, b: Sample) -> Bool { a.id < b.id }
    }
    struct Deletion: Equatable, Comparable {
        var id: String
        var deletedAt: Int64
        static func < (a: Deletion, b: Deletion) -> Bool { a.id < b.id }
    }
    var samples: [Sample] = []
    /// Pending deletions.
    var deletions: [Deletion] = []
    var intervals: [SyncInterval] = []
    var ranges: [LayeringRange] = []
    var highScores: [DailyHighScore] = []
    /// Latest anchor per family fingerprint.
    var anchors: [UInt64: [UInt8]] = [:]
    /// Live samples whose current version the server rejected: id → reason.
    var rejected: [String: String] = [:]
    /// The latest record of each destination, in the order of those records (the last is current).
    var destinations: [StoreDestination] = []
    /// Set when the store's counts of live samples by origin (kept by its
    /// index) disagree with its samples' current versions: a model never
    /// sets it, so every comparison of a store's digest checks the counts.
    var originCountsDisagreement: String?

    var description: String {
        "\(samples.count) samples (\(samples.filter(\.synced).count) synced), \(deletions.count) pending deletions, \(intervals.count) intervals, \(ranges.count) ranges, \(highScores.count) high scores, \(anchors.count) anchors"
            + (originCountsDisagreement.map { ", \($0)" } ?? "")
    }

    static func of(_ store: StepLogStore) throws -> StoreDigest {
        var d = StoreDigest()
        try store.forEachSample { d.samples.append(Sample(id: $0.id.uuidString, sample: $0.sample, synced: $0.isSynced)) }
        d.samples.sort()
        d.deletions = try store.pendingDeletions(limit: .max).map { Deletion(id: $0.id.uuidString, deletedAt: $0.deletedAtMilliseconds) }.sorted()
        d.intervals = store.intervals().sorted { $0.startMilliseconds < $1.startMilliseconds }
        d.ranges = store.layeringRanges
        d.highScores = store.highScores
        d.anchors = store.locked { store.state.anchors.mapValues(\.anchor) }
        for r in try store.rejectedSamples() { d.rejected[r.sample.id.uuidString] = r.rejection.reason }
        d.destinations = store.destinations
        var recount = SampleOriginCounts()
        for s in d.samples { recount[s.sample.origin] += 1 }
        if store.samplesByOrigin != recount {
            d.originCountsDisagreement = "counts by origin \(store.samplesByOrigin), the samples \(recount)"
        }
        return d
    }
}

/// An independent model of what records mean (plain dictionaries), to check
/// the engine's replay against.
struct RecordModel {
    enum Current { case live(StepSample, synced: Bool), deleted(at: Int64) }
    var samples: [UUID: Current] = [:]
    var intervals: [UUID: SyncInterval] = [:]
    var ranges: [LayeringRange] = []
    var highScores: [UInt32: DailyHighScore] = [:]
    var anchors: [UInt64: [UInt8]] = [:]
    /// A rejection holds the version current when it was recorded, until any other record of the id.
    var rejected: [UUID: String] = [:]
    var destinations: [StoreDestination] = []

    mutating func apply(_ record: LogRecord) {
        switch record {
        case .samplesUnacknowledged(let list):
            for e in list {
                guard case .live(let s, _) = samples[e.id] else { continue }
                samples[e.id] = .live(s, synced: false)
                rejected[e.id] = e.reason.isEmpty ? nil : e.reason
            }
        case .destination(let d):
            destinations.removeAll { $0.isSame(as: d) }
            destinations.append(d)
        case .sampleUpsert(let r):
            samples[r.sample.id] = .live(r.sample, synced: r.isSynced)
            rejected[r.sample.id] = nil
        case .samplesRejected(let list):
            for r in list {
                if case .live(_, synced: false) = samples[r.id] { rejected[r.id] = r.reason }
            }
        case .samplesAcknowledged(let ids):
            for id in ids {
                rejected[id] = nil
                switch samples[id] {
                case .live(let s, _): samples[id] = .live(s, synced: true)
                case .deleted: samples[id] = nil
                case nil: break
                }
            }
        case .sampleDeleted(let id, let at):
            samples[id] = .deleted(at: at)
            rejected[id] = nil
        case .intervalStatus(let i): intervals[i.id] = i
        case .intervalsCleared: intervals = [:]; ranges = []
        case .layeringRange(let r): if !ranges.contains(r) { ranges.append(r) }
        case .dailyHighScore(let s): highScores[s.day] = s
        case .sourceAnchor(let family, let anchor): anchors[family] = anchor
        case .syncedThrough, .padding: break
        }
    }

    var digest: StoreDigest {
        var d = StoreDigest()
        for (id, current) in samples {
            switch current {
            case .live(let s, let synced): d.samples.append(StoreDigest.Sample(id: id.uuidString, sample: s, synced: synced))
            case .deleted(let at): d.deletions.append(StoreDigest.Deletion(id: id.uuidString, deletedAt: at))
            }
        }
        d.samples.sort()
        d.deletions.sort()
        d.intervals = intervals.values.sorted { $0.startMilliseconds < $1.startMilliseconds }
        d.ranges = ranges
        d.highScores = highScores.values.sorted { $0.day < $1.day }
        d.anchors = anchors
        for (id, reason) in rejected { d.rejected[id.uuidString] = reason }
        d.destinations = destinations
        return d
    }
}

/// A record as found in a segment file, decoded by the library's reader.
struct FoundRecord {
    var segment: String
    var segmentIndex: Int
    var offset: Int64
    var size: Int
    var record: LogRecord
    var end: Int64 { offset + Int64(size) }
}

/// Every record of every segment in `dir`, in order (the store must be clean).
func readAllRecords(_ dir: String) throws -> [FoundRecord] {
    var result: [FoundRecord] = []
    for (segmentIndex, path) in segmentFiles(dir).enumerated() {
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        let header = try SegmentHeader.read(fd).get()
        var reader = SegmentReader(fd: fd, fileSize: try fd.size(), from: header.dataStart)
        while let item = try reader.next() {
            switch item {
            case .record(let offset, let type, let payload, let size):
                let record = try LogRecord.decode(type: type, payload: payload).get()
                result.append(FoundRecord(segment: path, segmentIndex: segmentIndex, offset: offset, size: size, record: record))
            case .damage(let offset, let damage):
                throw StepLogError.corruption(path: path, offset: offset, kind: .damage(damage)) // the reference store is clean
            }
        }
    }
    return result
}

/// Writes a seeded, known history to a store: batches mixing new samples,
/// changed versions, identical re-upserts, relabels (another origin),
/// revivals of deleted samples, deletions (of live, deleted and unknown
/// UUIDs), acknowledgements of samples and of deletions, rejections of
/// unsynced samples, acknowledgements taken back, destinations, lost
/// deletions restored, interval statuses,
/// clears, ranges, high scores and source anchors, each batch followed by
/// `sync`. Returns the store's byte size (all segments) after each
/// acknowledged batch.
@discardableResult
func writeKnownHistory(_ dir: String, segmentSize: Int, batches: Int, seed: UInt64,
                       options: StoreOptions = StoreOptions(), until done: ((StepLogStore) -> Bool)? = nil) throws -> [Int64] {
    var rng = SeededGenerator(seed: seed)
    var options = options
    options.segmentSize = segmentSize
    let store = try StepLogStore.open(dir, options: options)
    var next: UInt64 = 0
    var acked: [Int64] = []
    for batch in 0..<batches {
        var samples: [StepSample] = []
        for _ in 0..<Int.random(in: 1...12, using: &rng) {
            samples.append(makeSample(next, count: Int.random(in: 0...500, using: &rng),
                                      device: Bool.random(using: &rng) ? "Watch" : nil))
            next += 1
        }
        if next > 5 {
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let id = UInt64.random(in: 0..<next, using: &rng)
                switch try store.sampleState(id: .test(id)) {
                case .live(let stored):
                    var s = stored.sample
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0: s.count += 1
                    case 1: s.origin = SampleOrigin.allCases.randomElement(using: &rng)! // a relabel, or identical
                    default: break // identical: writes nothing
                    }
                    samples.append(s)
                case .deletionPending:
                    samples.append(makeSample(id, count: Int.random(in: 0...500, using: &rng))) // revived
                case .absent:
                    break
                }
            }
        }
        try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: Double(batch)))
        if next > 5, Int.random(in: 0..<3, using: &rng) == 0 {
            // Live, already deleted, or unknown (never written, or acknowledged).
            let ids = (0..<Int.random(in: 1...4, using: &rng)).map { _ in UUID.test(UInt64.random(in: 0..<(next + 3), using: &rng)) }
            try store.delete(ids, at: Date(timeIntervalSince1970: Double(batch) + 0.5))
        }
        if Int.random(in: 0..<3, using: &rng) == 0 {
            try store.markSynced(try store.unsyncedSamples(limit: Int.random(in: 1...20, using: &rng)))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            // The server refused some: kept, not sent again until changed (a later batch may change,
            // relabel, delete or revive them).
            let refused = try store.unsyncedSamples(limit: Int.random(in: 1...3, using: &rng))
            try store.markRejected(refused.map { ($0, "count: refused in batch \(batch)") }, at: Date(timeIntervalSince1970: Double(batch) + 0.7))
        }
        if Int.random(in: 0..<4, using: &rng) == 0 {
            try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: Int.random(in: 1...5, using: &rng)))
        }
        let roll = Int.random(in: 0..<14, using: &rng)
        if roll < 4 {
            let status = IntervalStatus.allCases.randomElement(using: &rng)!
            try store.recordIntervals([SyncInterval(id: .test(1_000_000 + UInt64(roll)), startMilliseconds: Int64(roll) * 10,
                                                    endMilliseconds: Int64(roll) * 10 + 10, stepCount: Int64(batch), status: status)])
        } else if roll == 6 {
            try store.clearIntervals(at: Date(timeIntervalSince1970: Double(batch)))
        } else if roll == 7 {
            try store.recordLayeringRange(LayeringRange(startMilliseconds: Int64(batch), endMilliseconds: Int64(batch) + 100))
        } else if roll == 8 || roll == 4 {
            try store.recordHighScore(DailyHighScore(day: 20260101 + UInt32(batch % 28), steps: Int64(batch), recordedAtMilliseconds: Int64(batch)))
        } else if roll == 9 || roll == 5 {
            try store.recordSourceAnchor(family: ["export", "mock"][batch % 2], anchor: Array("batch \(batch)".utf8))
        } else if roll == 10, next > 5, case .live(let stored) = try store.sampleState(id: .test(UInt64(batch * 7) % next)), stored.isSynced {
            // The server turned out not to hold it (sent again), or holds another uploader's version (held back).
            _ = try store.unacknowledge([(stored, batch % 2 == 0 ? "held by another uploader in batch \(batch)" : nil)],
                                    at: Date(timeIntervalSince1970: Double(batch) + 0.8))
        } else if roll == 11 {
            try store.recordDestination(StoreDestination(serverId: "server-\(batch % 3)", user: "alice", url: "http://127.0.0.1:8000",
                                                         uploader: .test(99), recordedAtMilliseconds: Int64(batch) * 1_000,
                                                         provenEqualAtMilliseconds: batch % 2 == 0 ? Int64(batch) * 1_000 : 0))
        } else if roll == 12 {
            // A deletion the server lost, of a UUID the store no longer holds.
            _ = try store.restoreDeletions([.test(1_000_000_000 + UInt64(batch))], at: Date(timeIntervalSince1970: Double(batch) + 0.9))
        }
        try store.sync()
        acked.append(store.counts.bytes)
        if let done, done(store) { break }
    }
    try store.close()
    return acked
}

/// The model's digest after the first `n` records, for every n (computed once).
func prefixDigests(_ records: [FoundRecord]) -> [StoreDigest] {
    var model = RecordModel()
    var result = [model.digest]
    for r in records {
        model.apply(r.record)
        result.append(model.digest)
    }
    return result
}

func copyDirectory(_ from: String, to: String) throws {
    try? FileManager.default.removeItem(atPath: to)
    try FileManager.default.copyItem(atPath: from, toPath: to)
}


/// A known history written once into `reference`, with its records, the store
/// digest after every prefix of them and its segment files. Replay tests copy
/// it to `work`, damage the copy, reopen it, and compare with `digests`.
struct ReferenceHistory {
    let reference: String
    let work: String
    let records: [FoundRecord]
    let digests: [StoreDigest]
    /// Segment paths in `reference`, oldest first.
    let files: [String]

    init(in tmp: TemporaryDirectory, segmentSize: Int, batches: Int, seed: UInt64, until done: ((StepLogStore) -> Bool)? = nil) throws {
        reference = tmp.sub("reference")
        work = tmp.sub("work")
        try writeKnownHistory(reference, segmentSize: segmentSize, batches: batches, seed: seed, until: done)
        records = try readAllRecords(reference)
        digests = prefixDigests(records)
        files = segmentFiles(reference)
    }

    /// Where `files[index]` is in the working copy.
    func workPath(_ index: Int) -> String { work + "/" + (files[index] as NSString).lastPathComponent }
}

/// Compacts the older-format store at `path` (which must hold dead bytes) and
/// reopens it by full replay, expecting every segment rewritten in the current
/// format version: how VersionOneTests and VersionTwoTests upgrade a store.
func compactedToCurrentFormat(_ path: String, options: StoreOptions = StoreOptions(),
                              sourceLocation: SourceLocation = #_sourceLocation) throws -> StepLogStore {
    let report = try StepLogStore.compact(directory: path, options: options)
    #expect(report.before.deadBytes > 0 && report.after.deadBytes == 0, sourceLocation: sourceLocation)
    let store = try StepLogStore.open(path, options: .fullReplay)
    #expect(store.segmentInfos.allSatisfy { $0.header.version == FormatConstants.formatVersion }, sourceLocation: sourceLocation)
    return store
}
