// Fuzz target `store-open`: a whole segment file (header and records) opened
// as a store by StepLogStore.open itself (StoreOpener: lock, listing, header
// read, the replay pipeline, the unsynced-tail rule, applying each record to
// the index), then every sample read back through the index. A store this
// small is replayed on the calling thread (`ReplayPipeline.startReading`; the
// reader thread's hand-over is covered by ReplayReaderThreadTests). Several
// times slower than `segment`, which drives the same readers without the
// store around them.
//
// Input: a mode byte, then the file (FuzzSegmentInput: checksum repair and
// header-block expansion). The file is named after the sequence its header
// claims.
//
// Invariants beyond "no crash":
// - a read-only open and a writer's open agree (both fail, or both succeed
//   with the same samples, intervals and pending deletions);
// - after the writer's open (which truncates an unsynced tail) and close, the
//   store opens again with no tail to drop and the same contents;
// - every sample the counts promise is read back, each once.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import StepLog

private let storeDirectory: String = {
    let path = fuzzScratchDirectory + "/store-open"
    mkdir(path, 0o755)
    return path
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStoreOpen(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let file = FuzzSegmentInput.file(data, size)
    let sequence = FuzzSegmentInput.sequence(file)

    // A fresh directory holding just this segment.
    fuzzRemoveTree(storeDirectory)
    mkdir(storeDirectory, 0o755)
    file.withUnsafeBytes { fuzzWriteFile(storeDirectory + "/" + SegmentName.fileName(sequence: sequence), $0) }

    var readOnly = StoreOptions(readOnly: true)
    readOnly.useSnapshots = false
    let seen = contents(options: readOnly)

    var writer = StoreOptions(createIfMissing: false)
    writer.preallocationSize = 0
    writer.writeSnapshots = false
    writer.useSnapshots = false
    let written = contents(options: writer)
    switch (seen, written) {
    case (.failure, .failure): return 0
    case (.success(let a), .success(let b)):
        fuzzCheck(a == b, "a read-only open and a writer's open see different stores: \(a.summary) vs \(b.summary)")
    case (.success(let a), .failure(let e)):
        fuzzCheck(false, "a read-only open succeeds (\(a.summary)) but a writer's open fails: \(e)")
    case (.failure(let e), .success(let b)):
        fuzzCheck(false, "a writer's open succeeds (\(b.summary)) but a read-only open fails: \(e)")
    }
    guard case .success(let before) = written else { return 0 }
    switch contents(options: readOnly) {
    case .failure(let e):
        fuzzCheck(false, "the store does not open after a writer opened and closed it: \(e)")
    case .success(let after):
        fuzzCheck(after.tornTail == nil, "a second open drops a tail again: \(String(describing: after.tornTail))")
        fuzzCheck(after == before.withoutTornTail, "reopening changed the store: \(before.summary) vs \(after.summary)")
    }
    return 0
}

/// What an open finds, in a comparable form.
private struct StoreContents: Equatable {
    var samples: [StoredSample]
    var synced: Int
    var pendingDeletions: [UUID]
    var intervals: [SyncInterval]
    var highScores: [DailyHighScore]
    var tornTail: Int64?

    var summary: String { "\(samples.count) samples (\(synced) synced), \(pendingDeletions.count) deletions, \(intervals.count) intervals" }

    var withoutTornTail: StoreContents {
        var copy = self
        copy.tornTail = nil
        return copy
    }

    static func == (a: StoreContents, b: StoreContents) -> Bool {
        // Positions and the tail report may differ between opens; the content may not.
        a.samples.map(\.sample) == b.samples.map(\.sample) && a.samples.map(\.isSynced) == b.samples.map(\.isSynced)
            && a.synced == b.synced && a.pendingDeletions == b.pendingDeletions && a.intervals == b.intervals
            && a.highScores == b.highScores && (a.tornTail == nil) == (b.tornTail == nil)
    }
}

private func contents(options: StoreOptions) -> Result<StoreContents, Error> {
    Result {
        let store = try StepLogStore.open(storeDirectory, options: options)
        defer { try? store.close() }
        var samples: [StoredSample] = []
        try store.forEachSample { samples.append($0) }
        let counts = store.counts
        fuzzCheck(samples.count == counts.samples, "read back \(samples.count) samples, counts say \(counts.samples)")
        fuzzCheck(Set(samples.map(\.sample.id)).count == samples.count, "a sample is read back twice")
        fuzzCheck(samples.filter(\.isSynced).count == counts.syncedSamples, "synced samples read back differ from the counts")
        let deletions = try store.pendingDeletions(limit: Int.max).map(\.id)
        fuzzCheck(deletions.count == counts.pendingDeletions, "read back \(deletions.count) deletions, counts say \(counts.pendingDeletions)")
        let result = StoreContents(samples: samples, synced: counts.syncedSamples, pendingDeletions: deletions,
                                   intervals: store.intervals(), highScores: store.highScores,
                                   tornTail: store.openReport.tornTail?.offset)
        try store.close()
        return result
    }
}

/// Seeds: see FuzzSeedStore.writeSegmentSeeds.
@_cdecl("LLVMFuzzerInitialize")
public func initializeStoreOpenFuzz(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    FuzzSeeds.writeIfRequested { dir in try FuzzSeedStore.writeSegmentSeeds(in: dir) }
    return 0
}
