import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `steplog verify`: checks a store without changing it, and keeps going
/// after a problem wherever it can, so one run lists every problem it can reach.
///
/// Checks: segment headers (a version 2 header block is zero after the
/// header) and the chain of segments (no missing sequence, no gap); every
/// record's framing, checksum, type (defined in its segment's version) and
/// payload shape (padding all zero, tombstones 24 bytes); synced-through
/// records (each claims an offset at or before itself, never less than the one
/// before it); damage in the newest segment judged by the unsynced-tail rule;
/// every index snapshot's checksums, that it matches its segment, and that it
/// equals a fresh build from the segment; and the index's invariants after a
/// replay (each entry points at a sample record, or for a pending deletion a
/// tombstone, with its UUID, and a live one carries its record's origin;
/// tombstones are never marked synced; the unsynced, pending-deletion and
/// by-origin counts add up; each interval's status record is an
/// interval status for its id).
/// How intervals tile the data range is the pipeline's invariant, not the
/// store's, and is checked by StepSync's tests.
public enum StoreVerifier {
    public struct Problem: Equatable, Sendable, CustomStringConvertible {
        public var file: String
        public var offset: Int64?
        public var what: String

        public var description: String {
            let name = (file as NSString).lastPathComponent
            return offset.map { "\(name) @ \($0): \(what)" } ?? "\(name): \(what)"
        }
    }

    public struct Result: Sendable {
        public var problems: [Problem] = []
        /// Findings that are not damage (a torn tail the next writer truncates,
        /// a compaction the next open finishes, a missing snapshot).
        public var notes: [String] = []
        public var segments = 0
        public var records = 0
        public var snapshots = 0
    }

    public static func verify(directory: String) throws -> Result {
        try StoreDirectoryCheck.requireExisting(directory)
        var result = Result()
        var found: [SegmentInfo] = []
        var snapshotSequences: Set<UInt64> = []
        let names = try Directory.names(in: directory).sorted()
        try StoreDirectoryCheck.refuseStrangers(
            names.filter { $0 != FormatConstants.lockFileName && !$0.hasSuffix(FormatConstants.temporarySuffix)
                && SegmentName.sequence(of: $0) == nil && SegmentName.snapshotSequence(of: $0) == nil },
            segments: names.filter { SegmentName.sequence(of: $0) != nil }.count, in: directory)
        for name in names {
            let path = Directory.join(directory, name)
            if name.hasSuffix(FormatConstants.temporarySuffix) {
                result.notes.append("\(name) is a leftover temporary file (removed by the next writer)")
            } else if let sequence = SegmentName.snapshotSequence(of: name) {
                snapshotSequences.insert(sequence)
            } else if let sequence = SegmentName.sequence(of: name) {
                let fd = try FileDescriptor.open(path, O_RDONLY)
                defer { fd.close() }
                let size = try fd.size()
                switch try SegmentHeader.read(fd) {
                case .success(let header):
                    if let problem = header.problem(fileSequence: sequence, fileSize: size) {
                        result.problems.append(Problem(file: path, offset: problem.offset, what: problem.description))
                        if case .sequenceMismatch = problem { continue }
                    }
                    found.append(SegmentInfo(header: header, path: path, size: size))
                    if let problem = try checkHeaderBlock(header, fd: fd, size: size) {
                        result.problems.append(Problem(file: path, offset: problem.offset, what: problem.what))
                    }
                case .failure(let problem):
                    result.problems.append(Problem(file: path, offset: problem.offset, what: problem.description))
                }
            }
        }
        found.sort { $0.sequence < $1.sequence }
        let set = SegmentSet(resolving: found)
        for s in set.obsoleteInputs { result.notes.append("\(s.name) was replaced by a committed compaction (deleted by the next open)") }
        for s in set.uncommittedOutputs { result.notes.append("\(s.name) is output of a compaction that did not commit (deleted by the next open)") }
        var live = set.live
        result.segments = live.count
        // The chain: report every break, not only the first.
        var rest = live
        while let gap = SegmentSet.firstBreak(in: rest, directory: directory) {
            result.problems.append(Problem(file: gap.path, offset: gap.offset, what: gap.problem.description))
            // A segment past its reserved range is the break itself; any other
            // break lies between the segment at `index` and the one before it.
            if case .pastReservedRange = gap.problem { rest.removeFirst(gap.index + 1) } else { rest.removeFirst(gap.index) }
        }

        // Records, and a replay for the invariants (and each segment's index size).
        let state = StoreState()
        let keys = SegmentKeyReader(segments: live)
        state.index.keyAt = { try keys.key(at: $0) }
        var keysAfter: [UInt64: Int] = [:]
        for (i, segment) in live.enumerated() {
            let fd = try FileDescriptor.open(segment.path, O_RDONLY)
            defer { fd.close() }
            var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart)
            var check = RecordCheck(segment: segment, state: state)
            while let step = try reader.nextRecord(version: segment.header.version) {
                switch step {
                case .record(let record, let offset, _):
                    result.records += 1
                    if let what = try check.check(record, at: offset) {
                        result.problems.append(Problem(file: segment.path, offset: offset, what: what))
                    }
                case .malformed(let offset, let problem):
                    result.records += 1
                    result.problems.append(Problem(file: segment.path, offset: offset, what: problem.description))
                case .damage(let offset, let damage):
                    let isNewest = i == live.count - 1
                    switch try SegmentTail.classify(segment, fd: fd, damageAt: offset, isNewest: isNewest, checksummed: false) {
                    case .unsyncedTail(let garbageEnd):
                        result.notes.append("\(segment.name) ends with \(garbageEnd - offset) bytes no sync acknowledged at offset \(offset) (a writer died mid-append; the next writer truncates them)")
                    case .corruption(let vouchedBy):
                        let vouched = vouchedBy.map { ", inside bytes the synced-through record at \($0) vouches for" } ?? ""
                        result.problems.append(Problem(file: segment.path, offset: offset,
                                                       what: "\(damage)\(vouched) (\(segment.size - offset) bytes from here on not checked)"))
                    }
                }
            }
            try state.finishReplay()
            keysAfter[segment.sequence] = state.index.count
            live[i].size = reader.offset
        }
        checkInvariants(state, segments: live, directory: directory, into: &result)

        // Snapshots.
        for sequence in snapshotSequences.sorted() {
            let name = SegmentName.snapshotFileName(sequence: sequence)
            let path = Directory.join(directory, name)
            guard let segment = live.first(where: { $0.sequence == sequence }) else {
                result.notes.append("\(name) has no live segment (removed by the next writer)")
                continue
            }
            result.snapshots += 1
            if sequence == live.last?.sequence {
                result.notes.append("\(name) belongs to the newest segment, which is always replayed")
                continue
            }
            if let version = SegmentSnapshot.fileVersion(sequence: sequence, directory: directory), version != FormatConstants.snapshotVersion {
                result.notes.append("\(name) is a version \(version) snapshot, which this build ignores (the next writer rebuilds it)")
                continue
            }
            switch SegmentSnapshot.load(for: segment, directory: directory) {
            case .failure(let problem):
                result.problems.append(Problem(file: path, offset: nil, what: problem.description))
            case .success(let snapshot):
                // The key count after the segment only sizes the index: a compaction
                // that ran beside the writer changes it for later segments.
                if let replayed = keysAfter[sequence], UInt64(replayed) != snapshot.keysAfter {
                    result.notes.append("\(name) counts \(snapshot.keysAfter) keys after its segment, a replay \(replayed) (a compaction ran beside the writer)")
                }
                if let fresh = try? SegmentSnapshot.build(from: segment, keysAfter: Int(snapshot.keysAfter)), fresh != snapshot {
                    result.problems.append(Problem(file: path, offset: nil, what: "snapshot does not match its segment's records"))
                }
            }
        }
        for segment in live.dropLast() where !snapshotSequences.contains(segment.sequence) {
            result.notes.append("\(segment.name) has no index snapshot (the next writer builds it)")
        }
        return result
    }

    /// What verify checks of each record beyond replaying it (a `RecordView`
    /// handler): that synced-through records claim offsets inside their
    /// segment, at or before themselves, never less than an earlier claim.
    struct RecordCheck {
        let segment: SegmentInfo
        let state: StoreState
        /// The highest offset a synced-through record of the segment claimed so far.
        var lastClaim: UInt64 = 0

        /// Replays `record`, found at `offset` of the segment; returns what is wrong with it.
        mutating func check(_ record: RecordView, at offset: Int64) throws -> String? {
            try state.replay(record, at: LogPosition(segment.basePosition + UInt64(offset)))
            switch record {
            case .syncedThrough(let p):
                let claim = p.offset
                defer { lastClaim = max(lastClaim, claim) }
                if claim > UInt64(offset) || claim < UInt64(segment.dataStart) {
                    return "synced-through record claims offset \(claim), outside \(segment.dataStart)...\(offset)"
                }
                if claim < lastClaim { return "synced-through record claims offset \(claim), before an earlier claim of \(lastClaim)" }
                return nil
            case .sampleUpsert, .samplesAcknowledged, .intervalStatus, .intervalsCleared, .layeringRange, .dailyHighScore,
                 .sampleDeleted, .padding, .sourceAnchor, .samplesRejected, .destination, .samplesUnacknowledged:
                return nil // decoding checked their shape; what they mean is checked by the invariants after replay
            }
        }
    }

    /// A version 2 header has the first 4 KiB to itself: the bytes after it are zero.
    private static func checkHeaderBlock(_ header: SegmentHeader, fd: FileDescriptor, size: Int64) throws -> (offset: Int64, what: String)? {
        guard header.version != 1 else { return nil }
        let start = Int64(header.size), end = min(size, header.dataStart)
        if end < header.dataStart {
            return (size, "the file ends at \(size), inside its \(header.dataStart)-byte header block")
        }
        var bytes = [UInt8](repeating: 0, count: Int(end - start))
        let n = try bytes.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: $0.count, at: start) }
        if let i = bytes[0..<n].firstIndex(where: { $0 != 0 }) {
            return (start + Int64(i), "non-zero byte in the header block (records start at \(header.dataStart))")
        }
        return nil
    }

    private static func checkInvariants(_ state: StoreState, segments: [SegmentInfo], directory: String, into result: inout Result) {
        // Each index entry points at a sample record (a tombstone, for a
        // pending deletion) whose UUID leads back to it, and a live one
        // carries its record's origin.
        var unsynced = 0, pending = 0
        var byOrigin = SampleOriginCounts()
        let files = SegmentFileCache()
        state.index.forEach { entry in
            if entry.isTombstone {
                pending += 1
                if entry.isSynced { result.problems.append(Problem(file: directory, offset: nil, what: "the pending deletion at \(entry.position) is marked synced")) }
            } else {
                if !entry.isSynced { unsynced += 1 }
                byOrigin[entry.origin] += 1
            }
            guard let segment = segments.last(where: { $0.basePosition <= entry.position.rawValue }) else {
                result.problems.append(Problem(file: directory, offset: nil, what: "index entry \(entry.position) points before the first segment"))
                return
            }
            let offset = Int64(entry.position.rawValue - segment.basePosition)
            guard let mapping = try? files.mapping(for: segment, covering: 1) else { return }
            let kind = entry.isTombstone ? "tombstone" : "sample record"
            let found = RecordFrame.keyOfVersion(in: mapping, at: Int(offset))
            let ok = found.map { $0.isTombstone == entry.isTombstone && state.index.entry($0.key, at: entry.position) == entry } ?? false
            if !ok {
                result.problems.append(Problem(file: segment.path, offset: offset, what: "index entry \(entry.position) does not point at a \(kind) whose UUID leads back to it"))
            } else if !entry.isTombstone, case .record(let type, let payload, _) = RecordFrame.decode(mapping, at: Int(offset)),
                      case .success(.sampleUpsert(let sample)) = RecordView.decode(type: type, payload: payload, version: segment.header.version),
                      sample.origin != entry.origin {
                result.problems.append(Problem(file: segment.path, offset: offset, what: "index entry \(entry.position) says origin \(entry.origin), its record \(sample.origin)"))
            }
        }
        if byOrigin != state.samplesByOrigin {
            result.problems.append(Problem(file: directory, offset: nil, what: "live samples by origin (\(state.samplesByOrigin)) disagree with the index (\(byOrigin))"))
        }
        if unsynced != state.unsyncedCount {
            result.problems.append(Problem(file: directory, offset: nil, what: "unsynced count \(state.unsyncedCount) disagrees with the index (\(unsynced))"))
        }
        if pending != state.pendingDeletionCount {
            result.problems.append(Problem(file: directory, offset: nil, what: "pending deletion count \(state.pendingDeletionCount) disagrees with the index (\(pending))"))
        }
        var table = state.intervals
        let entries = table.sortedEntries()
        // Each interval's status record is an interval status with its id.
        for e in entries {
            guard let segment = segments.last(where: { $0.basePosition <= e.position.rawValue }),
                  let mapping = try? files.mapping(for: segment, covering: 1) else { continue }
            let offset = Int64(e.position.rawValue - segment.basePosition)
            var ok = false
            if case .record(let type, let payload, _) = RecordFrame.decode(mapping, at: Int(offset)),
               case .success(.intervalStatus(let status)) = RecordView.decode(type: type, payload: payload, version: segment.header.version) {
                ok = status.id == UUIDBytes(e.interval.id)
            }
            if !ok {
                result.problems.append(Problem(file: segment.path, offset: offset, what: "interval \(e.interval.id) does not point at its status record"))
            }
        }
    }
}
