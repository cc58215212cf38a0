// Builds the small stores the seed corpora of the storage targets come from.
import Foundation
@testable import StepLog

enum FuzzSeedStore {
    /// Writes a store holding every record type into `directory`: samples
    /// (with and without device names, every origin), acknowledgements,
    /// deletions and their acknowledgement, intervals, a clear, a layering
    /// range, a high score, a source anchor, acknowledgements taken back, a
    /// deletion restored and a destination. With a small `segmentSize`
    /// it spans several segments, each sealed one with its index snapshot.
    static func write(to directory: String, segmentSize: Int = FormatConstants.defaultSegmentSize, samples: Int = 24) throws {
        var options = StoreOptions(segmentSize: segmentSize)
        options.preallocationSize = 0
        let store = try StepLogStore.open(directory, options: options)
        let origins = SampleOrigin.allCases
        let batch = (0..<samples).map { i in
            StepSample(id: UUID(uuid: uuidBytes(UInt8(i))), startMilliseconds: 1_700_000_000_000 + Int64(i) * 60_000,
                       endMilliseconds: 1_700_000_000_000 + Int64(i) * 60_000 + 30_000, count: 10 + i,
                       sourceBundleId: i % 3 == 0 ? "com.apple.health.\(i)" : "Simon’s iPhone",
                       sourceDeviceName: i % 2 == 0 ? "Apple\u{A0}Watch" : nil, origin: origins[i % origins.count])
        }
        _ = try store.upsert(batch, fetchedAt: Date(timeIntervalSince1970: 1_700_000_100))
        try store.sync()
        let unsynced = try store.unsyncedSamples(limit: samples / 2)
        _ = try store.markSynced(unsynced)
        _ = try store.delete(batch.prefix(4).map(\.id), at: Date(timeIntervalSince1970: 1_700_000_200))
        let deletions = try store.pendingDeletions(limit: 2)
        _ = try store.markDeletionsAcknowledged(deletions)
        try store.recordIntervals([
            SyncInterval(id: UUID(uuid: uuidBytes(200)), startMilliseconds: 0, endMilliseconds: 86_400_000, stepCount: 1234, status: .pending),
            SyncInterval(id: UUID(uuid: uuidBytes(201)), startMilliseconds: 86_400_000, endMilliseconds: 2 * 86_400_000, stepCount: 0, status: .empty),
        ])
        try store.recordLayeringRange(LayeringRange(startMilliseconds: 0, endMilliseconds: 2 * 86_400_000, sourceFingerprint: 42))
        try store.recordHighScore(DailyHighScore(day: 20_000, steps: 9_876, recordedAtMilliseconds: 1_700_000_300_000))
        try store.recordSourceAnchor(family: "health", anchor: Array("anchor-7".utf8))
        try store.clearIntervals(at: Date(timeIntervalSince1970: 1_700_000_400))
        // What a reconcile writes: acknowledgements taken back (one held back with a reason), a
        // deletion restored, the destination.
        let acknowledged = try unsynced.compactMap { try store.sample(id: $0.id) }.filter(\.isSynced).prefix(2)
        _ = try store.unacknowledge(acknowledged.enumerated().map { ($1, $0 == 0 ? nil : "written later by another uploader") },
                                    at: Date(timeIntervalSince1970: 1_700_000_450))
        _ = try store.restoreDeletions([deletions[0].id], at: Date(timeIntervalSince1970: 1_700_000_460))
        try store.recordDestination(StoreDestination(serverId: "5E3D0000-0000-4000-8000-000000000001", user: "alice",
                                                     url: "http://127.0.0.1:8000", uploader: UUID(uuid: uuidBytes(99)),
                                                     recordedAtMilliseconds: 1_700_000_470_000, provenEqualAtMilliseconds: 0))
        // More upserts after a sync, left for close to sync.
        _ = try store.upsert(batch.suffix(3).map { var s = $0; s.count += 1; return s }, fetchedAt: Date(timeIntervalSince1970: 1_700_000_500))
        try store.close()
        store.waitForSnapshots()
    }

    static func uuidBytes(_ n: UInt8) -> uuid_t {
        (n, 0x5E, 0xED, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, n)
    }
}

extension FuzzSeedStore {
    /// The framed records of a segment file's bytes, in order.
    static func frames(ofSegment file: [UInt8]) -> [[UInt8]] {
        file.withUnsafeBytes { bytes in
            guard case .success(let header) = SegmentHeader.decode(bytes) else { return [] }
            var result: [[UInt8]] = []
            var at = Int(header.dataStart)
            while case .record(_, _, let size) = RecordFrame.decode(bytes, at: at) {
                result.append(Array(bytes[at..<(at + size)]))
                at += size
            }
            return result
        }
    }

    /// Paths of the segment files (sorted) in a store directory.
    static func segmentPaths(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { SegmentName.sequence(of: $0) != nil }.sorted().map { directory + "/" + $0 }
    }
}

/// Seeds on request: when STEPLOG_FUZZ_WRITE_SEEDS names a directory, a target
/// that generates its seeds writes them there and exits (`tools/fuzz --make-seeds`).
enum FuzzSeeds {
    static func writeIfRequested(_ make: (String) throws -> Void) {
        guard let dir = getenv("STEPLOG_FUZZ_WRITE_SEEDS").map({ String(cString: $0) }) else { return }
        do {
            try make(dir)
        } catch {
            fputs("cannot make seeds: \(error)\n", stderr)
            exit(1)
        }
        exit(0)
    }

    static func write(_ bytes: [UInt8], named name: String, in dir: String) {
        bytes.withUnsafeBytes { fuzzWriteFile(dir + "/" + name, $0) }
    }
}

extension FuzzSeedStore {
    /// Seeds of the targets whose input is a mode byte and a segment file
    /// (`segment`, `store-open`): the last segment of a small store holding
    /// every record type, as is (mode 0), with its header block folded
    /// (mode 4), and that folded file cut inside its last record.
    static func writeSegmentSeeds(in dir: String) throws {
        let store = fuzzScratchDirectory + "/segment-seeds"
        try write(to: store, samples: 12)
        guard let path = try segmentPaths(in: store).last else { return }
        let file = fuzzReadFile(path)
        FuzzSeeds.write([0] + file, named: "store-segment", in: dir)
        let folded = Array(file[0..<FormatConstants.segmentHeaderSize]) + file[FormatConstants.dataStartV2...]
        FuzzSeeds.write([4] + folded, named: "store-segment-folded", in: dir)
        FuzzSeeds.write([4] + folded.dropLast(5), named: "store-segment-folded-torn", in: dir)
    }
}
