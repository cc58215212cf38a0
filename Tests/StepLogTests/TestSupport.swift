import Foundation
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
                bundle: String = "com.apple.health", device: String? = "iPhone") -> StepSample {
    StepSample(id: .test(n), startMilliseconds: start + Int64(n) * 60_000, endMilliseconds: start + Int64(n) * 60_000 + 30_000,
               count: count, sourceBundleId: bundle, sourceDeviceName: device)
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
    var samples: [Sample] = []
    var intervals: [SyncInterval] = []
    var ranges: [LayeringRange] = []
    var highScores: [DailyHighScore] = []

    var description: String {
        "\(samples.count) samples (\(samples.filter(\.synced).count) synced), \(intervals.count) intervals, \(ranges.count) ranges, \(highScores.count) high scores"
    }

    static func of(_ store: StepLogStore) throws -> StoreDigest {
        var d = StoreDigest()
        try store.forEachSample { d.samples.append(Sample(id: $0.id.uuidString, sample: $0.sample, synced: $0.isSynced)) }
        d.samples.sort()
        d.intervals = store.intervals().sorted { $0.startMilliseconds < $1.startMilliseconds }
        d.ranges = store.layeringRanges
        d.highScores = store.highScores
        return d
    }
}

/// An independent model of what records mean (a plain dictionary), to check
/// the engine's replay against.
struct RecordModel {
    var samples: [UUID: (sample: StepSample, synced: Bool)] = [:]
    var intervals: [UUID: SyncInterval] = [:]
    var ranges: [LayeringRange] = []
    var highScores: [UInt32: DailyHighScore] = [:]

    mutating func apply(_ record: LogRecord) {
        switch record {
        case .sampleUpsert(let r): samples[r.sample.id] = (r.sample, r.isSynced)
        case .samplesSynced(let ids): for id in ids { samples[id]?.synced = true }
        case .intervalStatus(let i): intervals[i.id] = i
        case .intervalsCleared: intervals = [:]; ranges = []
        case .layeringRange(let r): if !ranges.contains(r) { ranges.append(r) }
        case .dailyHighScore(let s): highScores[s.day] = s
        }
    }

    var digest: StoreDigest {
        var d = StoreDigest()
        d.samples = samples.map { StoreDigest.Sample(id: $0.key.uuidString, sample: $0.value.sample, synced: $0.value.synced) }.sorted()
        d.intervals = intervals.values.sorted { $0.startMilliseconds < $1.startMilliseconds }
        d.ranges = ranges
        d.highScores = highScores.values.sorted { $0.day < $1.day }
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
        var reader = SegmentReader(fd: fd, fileSize: try fd.size())
        while let item = try reader.next() {
            guard case .record(let offset, let type, let payload, let size) = item else {
                throw StepLogError.corruption(path: path, offset: 0, reason: "unexpected damage in reference store")
            }
            let record = try LogRecord.decode(type: type, payload: payload).get()
            result.append(FoundRecord(segment: path, segmentIndex: segmentIndex, offset: offset, size: size, record: record))
        }
    }
    return result
}

/// Writes a seeded, known history to a store: batches mixing new samples,
/// changed versions, identical re-upserts, synced markers, interval statuses,
/// clears, ranges and high scores, each batch followed by `sync`. Returns the
/// store's byte size (all segments) after each acknowledged batch.
@discardableResult
func writeKnownHistory(_ dir: String, segmentSize: Int, batches: Int, seed: UInt64) throws -> [Int64] {
    var rng = SeededGenerator(seed: seed)
    let store = try StepLogStore.open(dir, options: StoreOptions(segmentSize: segmentSize))
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
                if var s = try store.sample(id: .test(id))?.sample {
                    if Bool.random(using: &rng) { s.count += 1 } // else identical: writes nothing
                    samples.append(s)
                }
            }
        }
        try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: Double(batch)))
        if Int.random(in: 0..<3, using: &rng) == 0 {
            try store.markSynced(try store.unsyncedSamples(limit: Int.random(in: 1...20, using: &rng)))
        }
        let roll = Int.random(in: 0..<20, using: &rng)
        if roll < 6 {
            let status = IntervalStatus.allCases.randomElement(using: &rng)!
            try store.recordIntervals([SyncInterval(id: .test(1_000_000 + UInt64(roll)), startMilliseconds: Int64(roll) * 10,
                                                    endMilliseconds: Int64(roll) * 10 + 10, stepCount: Int64(batch), status: status)])
        } else if roll == 6 {
            try store.clearIntervals(at: Date(timeIntervalSince1970: Double(batch)))
        } else if roll == 7 {
            try store.recordLayeringRange(LayeringRange(startMilliseconds: Int64(batch), endMilliseconds: Int64(batch) + 100))
        } else if roll == 8 {
            try store.recordHighScore(DailyHighScore(day: 20260101 + UInt32(batch % 28), steps: Int64(batch), recordedAtMilliseconds: Int64(batch)))
        }
        try store.sync()
        acked.append(store.counts.bytes)
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

    init(in tmp: TemporaryDirectory, segmentSize: Int, batches: Int, seed: UInt64) throws {
        reference = tmp.sub("reference")
        work = tmp.sub("work")
        try writeKnownHistory(reference, segmentSize: segmentSize, batches: batches, seed: seed)
        records = try readAllRecords(reference)
        digests = prefixDigests(records)
        files = segmentFiles(reference)
    }

    /// Where `files[index]` is in the working copy.
    func workPath(_ index: Int) -> String { work + "/" + (files[index] as NSString).lastPathComponent }
}
