// Fuzz target `snapshot`: the index snapshot reader (SegmentSnapshot's
// decoders, SegmentSnapshot.check/load with SnapshotEntryReader) and opening
// a store that loads the snapshot instead of replaying its segment.
//
// Input: a mode byte, then a snapshot file. Mode bit 0: repair the body and
// header checksums, so that mutations reach the fields behind them. The file
// replaces the snapshot of segment 1 of a small store of several segments
// (built once per process).
//
// Invariants beyond "no crash":
// - a snapshot that decodes re-encodes to a snapshot that decodes the same,
//   and to the same bytes when its reserved field is zero;
// - reading the file (check/load, a window at a time) and decoding the bytes
//   in memory agree, and load succeeds whenever the decoded snapshot matches
//   its segment;
// - the store opens with the original snapshot in place exactly as it does
//   by replay.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import StepLog

private struct Template {
    let directory: String
    let firstSegment: SegmentInfo
    let snapshotPath: String
    let original: [UInt8]
    let replayed: [StepSample]
}

private let template: Template = {
    let directory = fuzzScratchDirectory + "/snapshot-store"
    do {
        try FuzzSeedStore.write(to: directory, segmentSize: 8192, samples: 96)
        let paths = try FuzzSeedStore.segmentPaths(in: directory)
        precondition(paths.count >= 3, "the snapshot target's store should span several segments")
        let fd = try FileDescriptor.open(paths[0], O_RDONLY)
        defer { fd.close() }
        guard case .success(let header) = try SegmentHeader.read(fd) else { fatalError("the template's first segment has no header") }
        let segment = SegmentInfo(header: header, path: paths[0], size: try fd.size())
        let snapshotPath = directory + "/" + SegmentName.snapshotFileName(sequence: header.sequence)
        var noSnapshots = StoreOptions(readOnly: true)
        noSnapshots.useSnapshots = false
        return Template(directory: directory, firstSegment: segment, snapshotPath: snapshotPath,
                        original: fuzzReadFile(snapshotPath), replayed: try samples(options: noSnapshots, directory: directory))
    } catch {
        fatalError("cannot build the snapshot target's store: \(error)")
    }
}()

/// The samples read back. With `checked`, they must be as many as the counts
/// say — not asked of a fuzzed snapshot: one whose checksums were recomputed
/// over invented entries is trusted by design (it is bound to its segment by
/// size and tail checksum; damage fails its checksums), and then its index
/// may disagree with the log.
private func samples(options: StoreOptions, directory: String, checked: Bool = true) throws -> [StepSample] {
    let store = try StepLogStore.open(directory, options: options)
    defer { try? store.close() }
    var result: [StepSample] = []
    try store.forEachSample { result.append($0.sample) }
    if checked {
        fuzzCheck(result.count == store.counts.samples, "read back \(result.count) samples, counts say \(store.counts.samples)")
    }
    return result
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSnapshot(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let t = template
    var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    if data[0] & 1 != 0 { FuzzChecksums.repairSnapshot(&bytes) }

    let decoded = bytes.withUnsafeBytes { SegmentSnapshot.decode($0) }
    if case .success(let snapshot) = decoded {
        let encoded = snapshot.encoded()
        let again = encoded.withUnsafeBytes { SegmentSnapshot.decode($0) }
        fuzzCheck(again == .success(snapshot), "a decoded snapshot does not re-encode to itself")
        if bytes[10] == 0 && bytes[11] == 0 { fuzzCheck(encoded == bytes, "a decoded snapshot re-encodes to other bytes") }
    }

    bytes.withUnsafeBytes { fuzzWriteFile(t.snapshotPath, $0) }
    let loaded = SegmentSnapshot.load(for: t.firstSegment, directory: t.directory)
    switch (decoded, loaded) {
    case (.success(let a), .success(let b)):
        fuzzCheck(a == b, "the file reader and the in-memory decoder read different snapshots")
    case (.failure(let why), .success):
        fuzzCheck(false, "the file reader accepts a snapshot the decoder refuses (\(why))")
    case (.success(let a), .failure(let why)):
        let tail = try? { () throws -> UInt32 in
            let fd = try FileDescriptor.open(t.firstSegment.path, O_RDONLY)
            defer { fd.close() }
            return try SegmentSnapshot.tailChecksum(fd, dataStart: t.firstSegment.dataStart, size: t.firstSegment.size)
        }()
        fuzzCheck(tail.map { a.matches(t.firstSegment, tailChecksum: $0) != nil } ?? true,
                  "the file reader refuses a snapshot that matches its segment: \(why)")
    case (.failure, .failure):
        break
    }

    // Opening with the snapshot: anything but a crash, and with the original
    // snapshot, what replay gives. (Only a snapshot that loads is used by an
    // open; any other is ignored and the segment replayed, as `store-open`
    // covers, so the slow open runs only then.)
    guard case .success = loaded else { return 0 }
    let opened = Result { try samples(options: StoreOptions(readOnly: true), directory: t.directory, checked: bytes == t.original) }
    if bytes == t.original {
        fuzzCheck((try? opened.get()) == t.replayed, "the store opened from its own snapshot differs from replay")
    }
    return 0
}

/// Seeds: the snapshot of the store's first segment, as is and truncated.
@_cdecl("LLVMFuzzerInitialize")
public func initializeSnapshotFuzz(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    FuzzSeeds.writeIfRequested { dir in
        FuzzSeeds.write([0] + template.original, named: "store-snapshot", in: dir)
        FuzzSeeds.write([1] + template.original.prefix(200), named: "store-snapshot-cut", in: dir)
    }
    return 0
}
