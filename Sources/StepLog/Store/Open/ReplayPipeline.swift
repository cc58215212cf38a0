import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replays segments into a `StoreState` on two threads: a reader thread reads
/// each segment, checks every checksum and the shape of sample payloads, and
/// hands over chunks of parsed records; the calling thread applies them in
/// log order, prefetching index slots a few records ahead. Reading and
/// checking (I/O, CRC) then overlap with the index's random memory accesses,
/// which are the two halves of opening a large store.
///
/// Replay stops at the first damage; everything before it is applied, so the
/// caller decides (torn tail, salvage, or error) exactly as a sequential
/// replay would.
struct ReplayPipeline {
    let segments: [SegmentInfo]
    /// Indices of sealed segments whose snapshot file should be tried first.
    var snapshots: Set<Int> = []
    var directory = ""
    var bandBytes = ReplayPipeline.defaultBandBytes
    /// Snapshot entries from which two threads apply them.
    var parallelEntries = SnapshotBandApplier.defaultParallelEntries
    var inlineReadBytes = ReplayPipeline.defaultInlineReadBytes

    enum Outcome {
        /// Every segment replayed; `dataEnds` holds where each one's records end
        /// (before any zero-filled space the writer had prepared), `replayed` the
        /// sealed segments that were read record by record (no usable snapshot),
        /// with the index's size after each.
        case clean(dataEnds: [Int64], replayed: [(index: Int, keysAfter: Int)])
        /// Damage in `segments[segmentIndex]` at `offset`: `.damage` where the
        /// bytes stop being records (which may be an unsynced tail), anything
        /// else in a record whose checksum matched (never a torn write).
        case damaged(segmentIndex: Int, offset: Int64, kind: StepLogError.CorruptionKind)
    }

    /// Records per chunk handed from the reader to the applier, and the most
    /// payload bytes a chunk copies (a synced marker carries 16 KB of UUIDs).
    static let chunkRecords = 16_384
    static let chunkPayloadBytes = 1 << 20
    /// Chunks that may wait between the two threads.
    static let queueDepth = 8
    /// How many sample versions ahead the applier prefetches.
    static let prefetchDistance = 16

    /// What the reader thread hands the applier, in log order.
    enum Item: Sendable {
        case chunk(ReplayChunk)
        case damage(segmentIndex: Int, offset: Int64, kind: StepLogError.CorruptionKind)
        case snapshotIgnored(String, String)
        case failed(Error)
        case finished
    }

    /// Stores of at most this many segment bytes are read on the calling
    /// thread, before applying: a thread costs more than it saves there
    /// (under AddressSanitizer, thread creation and its stack's mappings
    /// were most of the `store-open` fuzz target's time).
    static let defaultInlineReadBytes: Int64 = 1 << 20

    /// Replays into `state`, whose index is first sized for `expectedKeys`
    /// (on this thread, while the reader thread already reads).
    func run(into state: StoreState, expectedKeys: Int, report: inout OpenReport) throws -> Outcome {
        let queue = startReading()
        defer { queue.cancel() }
        state.index.reserve(expectedKeys)
        var dataEnds = segments.map(\.size)
        var replayed: [(index: Int, keysAfter: Int)] = []
        // Consecutive segments read from snapshots wait here, and are applied
        // together (see applySnapshots) when a segment without one, damage,
        // or the end arrives. The reader meanwhile maps and checks the next.
        var pending: [ReplayChunk] = []
        func applyPending() throws -> Outcome? {
            defer { pending.removeAll() }
            guard !pending.isEmpty else { return nil }
            guard let problem = try applySnapshots(pending.map { $0.snapshot! }, to: state, report: &report) else {
                report.segmentsFromSnapshots += pending.count
                return nil
            }
            queue.cancel()
            report.segmentsFromSnapshots += problem.run
            return .damaged(segmentIndex: pending[problem.run].segmentIndex, offset: problem.offset, kind: .malformedRecord(problem.problem))
        }
        // take() is nil only once the queue is cancelled, which this thread
        // does only on its way out.
        while let item = queue.take() {
            switch item {
            case .chunk(let chunk):
                if chunk.snapshot != nil {
                    pending.append(chunk)
                    // Each waits with an open file and a 64 KiB window: bound both.
                    if pending.count == Self.longestSnapshotRun, let damaged = try applyPending() { return damaged }
                    continue
                }
                if let damaged = try applyPending() { return damaged }
                if let problem = try apply(chunk, to: state) {
                    queue.cancel()
                    report.records += problem.applied
                    report.bytesReplayed += problem.offset
                    return .damaged(segmentIndex: chunk.segmentIndex, offset: problem.offset, kind: .malformedRecord(problem.problem))
                }
                report.records += chunk.count
                if let end = chunk.dataEnd {
                    report.bytesReplayed += end
                    dataEnds[chunk.segmentIndex] = end
                    if chunk.segmentIndex < segments.count - 1 { replayed.append((chunk.segmentIndex, state.index.count)) }
                }
            case .damage(let segmentIndex, let offset, let kind):
                if let damaged = try applyPending() { return damaged }
                report.bytesReplayed += offset
                return .damaged(segmentIndex: segmentIndex, offset: offset, kind: kind)
            case .failed(let error):
                throw error
            case .snapshotIgnored(let name, let reason):
                report.snapshotsIgnored.append("\(name): \(reason)")
            case .finished:
                if let damaged = try applyPending() { return damaged }
                return .clean(dataEnds: dataEnds, replayed: replayed)
            }
        }
        // Not reached (see above); were it, the replay did not finish.
        throw StepLogError.io(operation: "replay (its reader's queue was cancelled)", path: directory, errno: ECANCELED)
    }

    // MARK: Reader thread

    /// Starts the reader on its own thread, or for a small store
    /// (`inlineReadBytes`) reads every segment on this one into an unbounded
    /// queue; the applier takes the same items in the same order either way.
    private func startReading() -> BoundedQueue<Item> {
        let segments = self.segments, snapshots = self.snapshots, directory = self.directory
        if segments.reduce(0, { $0 + $1.size }) <= inlineReadBytes {
            let queue = BoundedQueue<Item>(capacity: .max)
            ReplayPipeline.read(segments, snapshots: snapshots, directory: directory, checkingOnTwoThreads: false, into: queue)
            return queue
        }
        let queue = BoundedQueue<Item>(capacity: Self.queueDepth)
        let reader = Thread {
            ReplayPipeline.read(segments, snapshots: snapshots, directory: directory, checkingOnTwoThreads: true, into: queue)
        }
        reader.stackSize = 1 << 20
        reader.start()
        return queue
    }

    private static func read(_ segments: [SegmentInfo], snapshots: Set<Int>, directory: String, checkingOnTwoThreads: Bool,
                             into queue: BoundedQueue<Item>) {
        let queueDepth = ReplayPipeline.queueDepth
        let checked = checkSnapshots(segments, snapshots, directory: directory, onTwoThreads: checkingOnTwoThreads)
        do {
            for (index, segment) in segments.enumerated() {
                if let check = checked[index] {
                    switch check {
                    case .success(let snapshot):
                        var chunk = ReplayChunk(segmentIndex: index, reserving: 0)
                        chunk.snapshot = snapshot
                        chunk.dataEnd = segment.size
                        // Checked; the applier collects consecutive snapshots and
                        // applies them together, reading their entries again then.
                        guard queue.put(.chunk(chunk), weight: queueDepth / 2) else { return }
                        continue
                    case .failure(let problem):
                        guard queue.put(.snapshotIgnored(SegmentName.snapshotFileName(sequence: segment.sequence), problem.description)) else { return }
                    }
                }
                let fd = try FileDescriptor.open(segment.path, O_RDONLY)
                defer { fd.close() }
                fd.adviseSequential()
                var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart)
                // No more records than the segment can hold (a small store's
                // replay would otherwise reserve ~400 KB per chunk).
                let most = Int((segment.size - segment.dataStart) / Int64(RecordFrame.headerSize)) + 1
                let reserve = min(chunkRecords, max(0, most))
                var chunk = ReplayChunk(segmentIndex: index, reserving: reserve)
                let base = segment.basePosition
                let version = segment.header.version
                while let step = try reader.nextRecord(version: version) {
                    switch step {
                    case .record(let record, let offset, _):
                        chunk.add(record, offset: offset, position: LogPosition(base + UInt64(offset)))
                        if chunk.count == chunkRecords || chunk.payloadBytes >= chunkPayloadBytes {
                            guard queue.put(.chunk(chunk)) else { return }
                            chunk = ReplayChunk(segmentIndex: index, reserving: reserve)
                        }
                    case .malformed(let offset, let problem):
                        guard queue.put(.chunk(chunk)) else { return }
                        _ = queue.put(.damage(segmentIndex: index, offset: offset, kind: .malformedRecord(problem)))
                        return
                    case .damage(let offset, let damage):
                        guard queue.put(.chunk(chunk)) else { return }
                        _ = queue.put(.damage(segmentIndex: index, offset: offset, kind: .damage(damage)))
                        return
                    }
                }
                chunk.dataEnd = reader.offset
                guard queue.put(.chunk(chunk)) else { return }
            }
            _ = queue.put(.finished)
        } catch {
            _ = queue.put(.failed(error))
        }
    }

    /// Checks the snapshot of every sealed segment in `snapshots`, by segment
    /// index. Each check reads its file through and computes its checksum;
    /// the applier waits for them all (it applies a run of snapshots band by
    /// band), so with `onTwoThreads` two threads share them.
    private static func checkSnapshots(_ segments: [SegmentInfo], _ snapshots: Set<Int>, directory: String,
                                       onTwoThreads: Bool) -> [Int: Result<SegmentSnapshot.Checked, SegmentSnapshot.Problem>] {
        let wanted = snapshots.filter { $0 < segments.count - 1 }.sorted()
        typealias Check = Result<SegmentSnapshot.Checked, SegmentSnapshot.Problem>
        // Each thread writes its own elements.
        struct Results: @unchecked Sendable { let slots: UnsafeMutableBufferPointer<Check?> }
        let results = Results(slots: .allocate(capacity: wanted.count))
        results.slots.initialize(repeating: nil)
        defer {
            _ = results.slots.deinitialize()
            results.slots.deallocate()
        }
        let threads = onTwoThreads && wanted.count >= 2 ? 2 : 1
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for j in stride(from: t, to: wanted.count, by: threads) {
                results.slots[j] = SegmentSnapshot.check(for: segments[wanted[j]], directory: directory)
            }
        }
        var checked: [Int: Check] = [:]
        for (j, index) in wanted.enumerated() { checked[index] = results.slots[j] }
        return checked
    }

    // MARK: Applying thread

    /// Bytes of index one band covers (see `SnapshotBandApplier`): with its
    /// key cache (twice the band's bytes, rounded up to a power of two), a
    /// band and its cache stay in the CPU's caches.
    static let defaultBandBytes = 1 << 20
    /// Most snapshots applied together (a 10 GB store has ~160 segments).
    static let longestSnapshotRun = 256

    /// Applies consecutive checked snapshots, which together mean what
    /// replaying their segments in order would (see `SnapshotBandApplier`).
    ///
    /// Segments' other records touch no sample, so they are applied first, in
    /// order; if snapshot `run` holds one that does not apply, the samples of
    /// the snapshots up to and including it are applied (as a sequential
    /// replay stopping there would have) and the problem is returned.
    private func applySnapshots(_ run: [SegmentSnapshot.Checked], to state: StoreState, report: inout OpenReport) throws
        -> (run: Int, offset: Int64, problem: PayloadProblem)? {
        var failure: (run: Int, offset: Int64, problem: PayloadProblem)?
        othersLoop: for (k, snapshot) in run.enumerated() {
            let base = snapshot.header.basePosition
            for other in snapshot.others {
                let problem = try other.payload.withUnsafeBytes {
                    try state.replay(type: other.type, payload: $0, at: LogPosition(base + UInt64(other.offset)))
                }
                if let problem {
                    failure = (k, Int64(other.offset), problem)
                    break othersLoop
                }
            }
        }
        var applier = SnapshotBandApplier(snapshots: failure.map { Array(run[0...$0.run]) } ?? run, state: state,
                                          segments: segments, directory: directory)
        applier.bandBytes = bandBytes
        applier.parallelEntries = parallelEntries
        let outcome = try applier.run()
        report.snapshotEntriesInParallel += outcome.entriesInParallel
        report.snapshotLaneRefusals += outcome.laneRefusals
        return failure
    }

    /// Applies a chunk in order. Returns the first record that is not a
    /// record of its type (and how many records came before it).
    private func apply(_ chunk: ReplayChunk, to state: StoreState) throws -> (offset: Int64, problem: PayloadProblem, applied: Int)? {
        let keys = chunk.keys
        let distance = Self.prefetchDistance
        for i in 0..<min(distance, keys.count) { state.index.prefetch(keys[i]) }
        var sample = 0
        var other = 0
        for (n, isVersion) in chunk.isVersion.enumerated() {
            if isVersion {
                if sample + distance < keys.count { state.index.prefetch(keys[sample + distance]) }
                try state.applyVersion(keys[sample], chunk.entries[sample])
                sample += 1
            } else {
                let record = chunk.others[other]
                other += 1
                let problem = try record.payload.withUnsafeBytes { try state.replay(type: record.type, payload: $0, at: record.position) }
                if let problem { return (record.offset, problem, n) }
            }
        }
        try state.finishReplay()
        return nil
    }
}
