import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opens a store directory: takes the lock, finishes or discards an
/// interrupted compaction, checks that segments follow each other, and replays
/// them (or loads their index snapshots) into a `StoreState`.
///
/// Damage policy (docs/FORMAT.md, "Recovery"; the rule itself is `SegmentTail`):
/// - In the newest segment, damage that no later synced-through record
///   vouches for is an unsynced tail (a writer died, a power loss tore
///   unsynced writes): it is truncated (writers only) and reported.
/// - Any other damage is corruption: opening fails naming segment, offset and
///   reason, unless `salvage` asks to keep the prefix before it.
struct StoreOpener {
    let directory: String
    let options: StoreOptions

    struct Result {
        var segments: [SegmentInfo]
        var state: StoreState
        var report: OpenReport
        var lock: FileLock?
        /// Sealed segments with no usable snapshot (a writer builds them), with
        /// the index's size after each.
        var segmentsWithoutSnapshot: [(SegmentInfo, Int)]
    }

    func run() throws -> Result {
        let started = Date()
        var report = OpenReport()
        let lock = try prepareDirectory()
        let listing = try list()
        if !options.readOnly {
            try removeTemporaryFiles(listing.temporary, report: &report)
            // A name a previous run created or renamed is durable only once
            // the directory is synced, and that run may have died (or its
            // directory sync failed) first: every writer syncs it on open.
            try Directory.sync(directory)
        }

        var segments = try readHeaders(listing.segments, report: &report)
        try resolveCompaction(&segments, report: &report)
        try checkSequence(&segments, report: &report)

        let state = StoreState(indexHash: options.indexHash)
        let keys = SegmentKeyReader(segments: segments)
        state.index.keyAt = { try keys.key(at: $0) }
        var pipeline = ReplayPipeline(segments: segments)
        pipeline.directory = directory
        pipeline.bandBytes = options.snapshotBandBytes
        pipeline.parallelEntries = options.snapshotParallelEntries
        pipeline.inlineReadBytes = options.replayInlineBytes
        if options.useSnapshots {
            pipeline.snapshots = Set(segments.indices.filter { listing.snapshots.contains(segments[$0].sequence) })
        }
        // Size the index so replay never rehashes: the newest snapshot says how
        // many samples the index holds after its segment; each later segment can
        // add one per ~80 bytes. (Trimmed afterwards if that was generous.)
        var expectedKeys = 0
        var bytesSoFar: Int64 = 0
        for (i, segment) in segments.enumerated() {
            bytesSoFar += segment.size
            if pipeline.snapshots.contains(i), let header = SegmentSnapshot.header(sequence: segment.sequence, directory: directory) {
                // At most one key per smallest keyed record (a tombstone) so
                // far: a damaged or forged count must not size the index
                // (one past Int.max trapped here; found by fuzzing).
                let most = UInt64(bytesSoFar / Int64(TombstonePayload.frameSize))
                expectedKeys = Int(min(header.keysAfter, most))
            } else {
                expectedKeys += Int(segment.size / 80)
            }
        }
        var withoutSnapshot: [(SegmentInfo, Int)] = []
        let outcome = try pipeline.run(into: state, expectedKeys: expectedKeys, report: &report)
        if case .clean(let dataEnds, let replayed) = outcome {
            for i in segments.indices { segments[i].size = dataEnds[i] }
            withoutSnapshot = replayed.map { (segments[$0.index], $0.keysAfter) }
        }
        if case .damaged(let i, let offset, let kind) = outcome {
            let fd = try FileDescriptor.open(segments[i].path, O_RDONLY)
            defer { fd.close() }
            switch try damaged(segments[i], fd: fd, offset: offset, kind: kind, isNewest: i == segments.count - 1, report: &report) {
            case .tornTail:
                segments[i].size = offset
            case .salvaged:
                segments[i].size = offset
                segments.removeSubrange((i + 1)...)
            }
        }
        state.index.shrinkToFit()
        report.segments = segments.count
        report.seconds = Date().timeIntervalSince(started)
        if !options.readOnly { try removeOrphanSnapshots(listing.snapshots, keeping: Set(segments.map(\.sequence))) }
        return Result(segments: segments, state: state, report: report, lock: lock, segmentsWithoutSnapshot: withoutSnapshot)
    }

    // MARK: Directory and lock

    private func prepareDirectory() throws -> FileLock? {
        switch Directory.kind(of: directory) {
        case nil:
            guard !options.readOnly, options.createIfMissing else {
                throw StepLogError.notAStore(path: directory, reason: "no such directory")
            }
            try Directory.create(directory)
        case .directory:
            break
        case .file, .other:
            throw StepLogError.notAStore(path: directory, reason: "it is a file, not a directory")
        }
        // Readers take no lock: the log is append-only and files are replaced by
        // rename, so a reader sees a consistent prefix even while a writer runs.
        if options.readOnly { return nil }
        // A directory that is not a store is refused before the lock is taken,
        // so that the refusal leaves no LOCK file in it.
        _ = try list()
        return try FileLock(path: Directory.join(directory, FormatConstants.lockFileName), exclusive: true)
    }

    private struct Listing {
        var segments: [(sequence: UInt64, name: String)] = []
        var temporary: [String] = []
        var snapshots: Set<UInt64> = []
    }

    private func list() throws -> Listing {
        var listing = Listing()
        var strangers: [String] = []
        for name in try Directory.names(in: directory) {
            if name == FormatConstants.lockFileName { continue }
            if name.hasSuffix(FormatConstants.temporarySuffix) { listing.temporary.append(name); continue }
            if let sequence = SegmentName.sequence(of: name) { listing.segments.append((sequence, name)); continue }
            if let sequence = SegmentName.snapshotSequence(of: name) { listing.snapshots.insert(sequence); continue }
            strangers.append(name)
        }
        try StoreDirectoryCheck.refuseStrangers(strangers, segments: listing.segments.count, in: directory)
        listing.segments.sort { $0.sequence < $1.sequence }
        return listing
    }

    /// Snapshots whose segment is gone (compaction, salvage) are deleted.
    private func removeOrphanSnapshots(_ snapshots: Set<UInt64>, keeping live: Set<UInt64>) throws {
        let orphans = snapshots.subtracting(live)
        guard !orphans.isEmpty else { return }
        for sequence in orphans { try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: sequence))) }
        try Directory.sync(directory)
    }

    private func removeTemporaryFiles(_ names: [String], report: inout OpenReport) throws {
        guard !names.isEmpty else { return }
        for name in names.sorted() {
            try Directory.remove(Directory.join(directory, name))
            report.removedTemporaryFiles.append(name)
        }
        try Directory.sync(directory)
    }

    // MARK: Headers, compaction, sequence

    private func readHeaders(_ names: [(sequence: UInt64, name: String)], report: inout OpenReport) throws -> [SegmentInfo] {
        var result: [SegmentInfo] = []
        for (index, entry) in names.enumerated() {
            let path = Directory.join(directory, entry.name)
            let fd = try FileDescriptor.open(path, O_RDONLY)
            defer { fd.close() }
            let size = try fd.size()
            switch try SegmentHeader.read(fd) {
            case .success(let header):
                if let problem = header.problem(fileSequence: entry.sequence, fileSize: size) {
                    throw StepLogError.corruption(path: path, offset: problem.offset, kind: .segmentHeader(problem))
                }
                result.append(SegmentInfo(header: header, path: path, size: size))
            case .failure(let problem):
                let isNewest = index == names.count - 1
                if isNewest, size < Int64(FormatConstants.segmentHeaderSize), problem != .badMagic || size < 8 {
                    // Creation cut short before the header was whole (not written by
                    // this version, which renames complete files into place).
                    if !options.readOnly {
                        try Directory.remove(path)
                        try Directory.sync(directory)
                    }
                    report.incompleteSegmentRemoved = entry.name
                    continue
                }
                throw StepLogError.corruption(path: path, offset: problem.offset, kind: .segmentHeader(problem))
            }
        }
        return result
    }

    /// Finishes a committed compaction (deletes its inputs left behind) or
    /// discards an uncommitted one (deletes its outputs): see `SegmentSet`.
    private func resolveCompaction(_ segments: inout [SegmentInfo], report: inout OpenReport) throws {
        let set = SegmentSet(resolving: segments)
        report.compactionFinished = set.obsoleteInputs.map(\.name)
        report.compactionDiscarded = set.uncommittedOutputs.map(\.name)
        let doomed = set.obsoleteInputs + set.uncommittedOutputs
        segments = set.live
        guard !doomed.isEmpty, !options.readOnly else { return }
        for segment in doomed {
            try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence)))
            try Directory.remove(segment.path)
        }
        try Directory.sync(directory)
    }

    /// Live segments have consecutive sequence numbers and each starts at the
    /// position where the previous one ends; anything else means a segment
    /// file is missing or was cut short.
    private func checkSequence(_ segments: inout [SegmentInfo], report: inout OpenReport) throws {
        guard let problem = SegmentSet.firstBreak(in: segments, directory: directory) else { return }
        let i = problem.index
        guard options.salvage else { throw StepLogError.corruption(path: problem.path, offset: problem.offset, kind: .chain(problem.problem)) }
        // Keep the segments before the break; set aside the rest.
        let dropped = Array(segments[i...])
        let setAside = try self.setAside(from: nil, segments: dropped)
        report.salvage = OpenReport.Salvage(segment: problem.path, offset: problem.offset, reason: problem.problem.description,
                                            bytesDropped: dropped.reduce(0) { $0 + $1.size },
                                            segmentsDropped: dropped.count, setAsidePath: setAside)
        segments.removeSubrange(i...)
        if !options.readOnly {
            for s in dropped {
                try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: s.sequence)))
                try Directory.remove(s.path)
            }
            try Directory.sync(directory)
        }
    }
}
