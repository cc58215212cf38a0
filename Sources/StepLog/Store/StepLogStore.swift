import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The StepLog store: an append-only log of checksummed records in segment
/// files, with an in-memory UUID index rebuilt on open.
///
/// Durability is explicit: mutations append records and change the in-memory
/// state at once, and `sync()` makes everything appended before it durable.
/// A caller acknowledges work (to a user, a server, the next stage) only after
/// `sync()` returns — or, pipelined, starts the sync with `syncInBackground()`,
/// writes the next batch, and acknowledges once `waitUntilDurable` returns
/// for the ticket. After a failed write or sync the store refuses every later
/// mutation with the same error until it is reopened.
///
/// One process writes a store at a time (enforced by `LOCK`); within the
/// process the store is thread-safe (one internal mutex).
public final class StepLogStore: @unchecked Sendable {
    public let directory: String
    public let options: StoreOptions
    /// What opening found and did (unsynced tail dropped, salvage, timings).
    public private(set) var openReport: OpenReport

    let mutex = NSLock()
    private var fileLock: FileLock?
    /// Live segments in order; the last is the one being written.
    var segments: [SegmentInfo]
    var writer: SegmentWriter?
    let readers = SegmentFileCache()
    let snapshots: SnapshotWorker
    /// Replaced whole (under the mutex) when a background compaction switches over.
    var state: StoreState
    var failure: StepLogError?
    var isClosed = false
    let scratch = WriteBuffer(capacity: 4096)
    /// Runs compactions in the background (docs/IMPL.md, "Compaction").
    let scheduler = CompactionScheduler()
    /// Syncs on a thread of its own for `syncInBackground`.
    let syncer = BackgroundSyncer()

    /// Opens (or creates) the store in `directory`.
    public static func open(_ directory: String, options: StoreOptions = StoreOptions()) throws -> StepLogStore {
        try StepLogStore(directory: directory, options: options)
    }

    private init(directory: String, options: StoreOptions) throws {
        precondition(options.segmentSize > FormatConstants.dataStartV2, "segment size must exceed the header block")
        self.directory = directory
        self.options = options
        let opened = try StoreOpener(directory: directory, options: options).run()
        fileLock = opened.lock
        segments = opened.segments
        state = opened.state
        openReport = opened.report
        snapshots = SnapshotWorker(directory: directory)
        if !options.readOnly && options.writeSnapshots {
            for (segment, keys) in opened.segmentsWithoutSnapshot { snapshots.enqueue(segment, keysAfter: keys) }
        }
        if !options.readOnly {
            if let last = segments.last, last.header.isSealed {
                // A writer never appends to an older version's segment (every
                // segment holds only its own version's record types) nor to one
                // with a reserved range (a compaction's output whose follower is
                // gone: the next segment starts where the range ends; appending
                // made a store no open accepted, found by fuzzing): seal it as it
                // is (its zero-filled space trimmed) and continue in a new one.
                let fd = try FileDescriptor.open(last.path, O_RDWR)
                defer { fd.close() }
                if try fd.size() != last.size {
                    try fd.truncate(to: last.size)
                    try fd.sync()
                }
                let w = try SegmentWriter.create(directory: directory,
                                                 header: SegmentHeader(sequence: last.sequence + 1, basePosition: last.nextBasePosition),
                                                 preallocation: options.preallocationSize, limit: Int64(options.segmentSize))
                writer = w
                segments.append(w.info)
                if last.header.version != FormatConstants.formatVersion { openReport.sealedOlderVersion = last.name }
                if options.writeSnapshots { snapshots.enqueue(last, keysAfter: state.index.count) }
            } else if let last = segments.last {
                writer = try SegmentWriter.reopen(last, preallocation: options.preallocationSize, limit: Int64(options.segmentSize))
            } else {
                let w = try SegmentWriter.create(directory: directory, header: SegmentHeader(sequence: 1, basePosition: 0),
                                                 preallocation: options.preallocationSize, limit: Int64(options.segmentSize))
                writer = w
                segments = [w.info]
            }
        }
        // From here on the index confirms tag matches through this store's
        // reads (which also see records not yet written out).
        state.index.keyAt = { [unowned self] position in try self.sampleKey(at: position) }
        // Only now may a compaction start on its thread: it takes the index's
        // lookups as they are set above (started before, it raced that write).
        if writer != nil {
            scheduler.consider(self)
            scheduler.watchForRequests(self)
        }
    }

    deinit {
        syncer.drain()
        if !isClosed, failure == nil { try? writer?.flush() }
        writer?.close()
        snapshots.wait()
    }

    @inline(__always)
    func locked<T>(_ body: () throws -> T) rethrows -> T {
        mutex.lock()
        defer { mutex.unlock() }
        return try body()
    }

    // MARK: Durability

    /// Makes every record appended so far durable (write, then fdatasync /
    /// F_FULLFSYNC). Returns once they are on stable storage. With
    /// `padSyncsToSector`, the bytes are first padded to a sector boundary.
    public func sync() throws {
        try locked { try syncLocked() }
        scheduler.noticeRequest(self)
    }

    func syncLocked() throws {
        let w = try writableWriter()
        try settleBackgroundSyncs(w)
        guard w.hasUnsyncedBytes else { return }
        do {
            if options.padSyncsToSector && !w.padToSector() {
                // No room for the padding: sealing syncs, and the next append
                // goes to a new file, which shares no sector with these bytes.
                _ = try roll()
                return
            }
            try w.syncAndVouch()
            syncer.noteDurable(w.endPosition)
            if let failed = snapshots.syncFailure { throw failed }
        } catch {
            throw fail(error)
        }
    }

    /// Syncs and closes the store, releasing the lock. Later calls throw `.closed`.
    public func close() throws {
        scheduler.stop() // outside the mutex: the compaction takes it to finish
        try locked {
            guard !isClosed else { return }
            syncer.drain()
            defer {
                isClosed = true
                writer?.close()
                writer = nil
                readers.closeAll()
                snapshots.wait()
                fileLock = nil
            }
            if failure == nil, writer != nil {
                try syncLocked()
                let w = writer!
                do {
                    try w.vouchBeforeClosing()
                    try w.trimZeroFill()
                    // A snapshot's failed sync is a failed sync of this store:
                    // the close does not report success over it.
                    snapshots.wait()
                    if let failed = snapshots.syncFailure { throw failed }
                } catch {
                    throw fail(error)
                }
            }
        }
    }

    // MARK: Counts

    public var counts: StoreCounts {
        locked {
            var byStatus: [IntervalStatus: Int] = [:]
            for status in IntervalStatus.allCases { byStatus[status] = state.intervals.count(of: status) }
            // Reading a rejected version's UUID back can fail only with the
            // disk; counts are a report, so that counts none as rejected.
            let rejected = (try? state.rejectedCount()) ?? 0
            return StoreCounts(samples: state.sampleCount, syncedSamples: state.syncedCount,
                               unsyncedSamples: state.unsyncedCount - rejected, rejectedSamples: rejected,
                               pendingDeletions: state.pendingDeletionCount,
                               intervals: byStatus,
                               intervalTotal: state.intervals.count, segments: segments.count,
                               bytes: totalBytes())
        }
    }

    /// Live samples by the origin label of their current version, as the
    /// index keeps them: no sample is read.
    public var samplesByOrigin: SampleOriginCounts { locked { state.samplesByOrigin } }

    /// Bytes of every live segment, including records not yet written out.
    func totalBytes() -> Int64 {
        var total: Int64 = 0
        for (i, s) in segments.enumerated() {
            total += (i == segments.count - 1 && writer != nil) ? writer!.endOffset : s.size
        }
        return total
    }

    /// Bytes the sample index has allocated.
    public var indexMemoryBytes: Int { locked { state.index.memoryBytes } }

    /// The live segments, oldest first (the last one's size includes pending bytes).
    public var segmentInfos: [SegmentInfo] {
        locked {
            var result = segments
            if let w = writer, !result.isEmpty {
                result[result.count - 1] = w.info
                result[result.count - 1].size = w.endOffset
            }
            return result
        }
    }

    // MARK: Internals shared by the extensions

    func releaseLock() { fileLock = nil }

    /// The writer, or the reason there is none (a background sync's failure too).
    func writableWriter() throws -> SegmentWriter {
        let w = try currentWriter()
        if let failed = syncer.failure { throw fail(failed) }
        return w
    }

    /// `writableWriter` without asking the sync thread (once a record, in `append`).
    private func currentWriter() throws -> SegmentWriter {
        if isClosed { throw StepLogError.closed(path: directory) }
        if let failure { throw failure }
        guard let w = writer else { throw StepLogError.readOnly(path: directory) }
        return w
    }

    /// Records a write failure so every later mutation refuses with it.
    func fail(_ error: Error) -> Error {
        if let e = error as? StepLogError {
            failure = e
            return e
        }
        return error
    }

    /// Appends one record (encoded by `encode`) and returns its position. Seals
    /// the segment and starts the next one when the record would cross
    /// `segmentSize` (a record never spans segments). The first record after
    /// an acknowledging sync is preceded by its `syncedThrough` record.
    func append(_ encode: (WriteBuffer) -> Void) throws -> LogPosition {
        var w = try currentWriter()
        if !w.beginAppend() {
            do { w = try roll() } catch { throw fail(error) }
        }
        let start = w.pending.count
        let offset = w.endOffset
        encode(w.pending)
        do {
            if w.endOffset > Int64(options.segmentSize), offset > w.info.dataStart {
                let record = Array(UnsafeRawBufferPointer(rebasing: w.pending.bytes[start...]))
                w.pending.truncate(to: start)
                let next = try roll()
                let at = next.endOffset
                next.pending.append(record)
                return LogPosition(next.info.basePosition + UInt64(at))
            }
            if w.pending.count >= options.writeBufferSize { try w.flush() }
        } catch {
            throw fail(error)
        }
        return LogPosition(w.info.basePosition + UInt64(offset))
    }

    /// Seals the current segment (synced) and starts the next (with `nextHeader`
    /// when given: a compaction reserving sequences and positions).
    func roll(nextHeader: SegmentHeader? = nil) throws -> SegmentWriter {
        let old = writer!
        try settleBackgroundSyncs(old)
        try old.seal()
        segments[segments.count - 1] = old.info
        old.close()
        writer = nil
        let header = nextHeader ?? SegmentHeader(sequence: old.info.sequence + 1, basePosition: old.endPosition)
        let next = try SegmentWriter.create(directory: directory, header: header,
                                            preallocation: options.preallocationSize, limit: Int64(options.segmentSize))
        writer = next
        segments.append(next.info)
        syncer.noteDurable(next.endPosition)
        sealed(old.info)
        scheduler.consider(self)
        return next
    }

    /// Called after a segment is sealed: its index snapshot is built in the background.
    func sealed(_ segment: SegmentInfo) {
        // Called from a roll, before the record that caused it is indexed: the
        // index holds exactly the samples up to the end of `segment`.
        if options.writeSnapshots { snapshots.enqueue(segment, keysAfter: state.index.count) }
    }

    /// Waits for index snapshots being written in the background.
    public func waitForSnapshots() { snapshots.wait() }

    /// The live segment holding `position`, with its current size.
    func segment(containing position: LogPosition) -> (index: Int, info: SegmentInfo)? {
        var lo = 0, hi = segments.count - 1
        guard hi >= 0, position.rawValue >= segments[0].basePosition else { return nil }
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if segments[mid].basePosition <= position.rawValue { lo = mid } else { hi = mid - 1 }
        }
        var info = segments[lo]
        if lo == segments.count - 1, let w = writer { info = w.info }
        return (lo, info)
    }

    /// Reads the record at `position` (from the file or from records not yet
    /// written out), checks its checksum, decodes it once, and passes it to
    /// `body`. Damage found here is corruption, never returned as data.
    func withRecord<T>(at position: LogPosition, _ body: (RecordView) throws -> T) throws -> T {
        guard let (i, info) = segment(containing: position) else {
            throw StepLogError.corruption(path: directory, offset: Int64(position.rawValue), kind: .noSegmentHolds(position: position.rawValue))
        }
        let offset = Int64(position.rawValue - info.basePosition)
        func decoded(_ type: UInt8, _ payload: UnsafeRawBufferPointer) throws -> T {
            switch RecordView.decode(type: type, payload: payload, version: info.header.version) {
            case .success(let record): return try body(record)
            case .failure(let problem): throw StepLogError.corruption(path: info.path, offset: offset, kind: .malformedRecord(problem))
            }
        }
        if i == segments.count - 1, let w = writer, offset >= w.info.size {
            let at = Int(offset - w.info.size)
            guard case .record(let type, let payload, _) = RecordFrame.decode(w.pending.bytes, at: at) else {
                preconditionFailure("pending record at \(position) does not decode")
            }
            return try decoded(type, payload)
        }
        let fd = (i == segments.count - 1 && writer != nil) ? writer!.fd : try readers.descriptor(for: info)
        var want = Int(min(512, info.size - offset))
        while true {
            scratch.removeAll()
            scratch.reserve(want)
            scratch.count = try fd.read(into: scratch.storage, count: want, at: offset)
            let frame = RecordFrame.decode(scratch.bytes, at: 0)
            if case .record(let type, let payload, _) = frame { return try decoded(type, payload) }
            if case .truncatedPayload(let declared, _) = frame,
               Int64(RecordFrame.size(payload: declared)) <= info.size - offset, want < RecordFrame.size(payload: declared) {
                want = RecordFrame.size(payload: declared)
                continue
            }
            throw StepLogError.corruption(path: info.path, offset: offset, kind: .damage(SegmentDamage(frame)!))
        }
    }

    /// Visits records in log order from `start` (a record position, or zero
    /// for the beginning) to the end, each decoded once, writing pending
    /// records out first. `body` returns false to stop.
    func scan(from start: LogPosition, _ body: (LogPosition, RecordView) throws -> Bool) throws {
        if let w = writer, failure == nil { do { try w.flush() } catch { throw fail(error) } }
        var first = 0
        var startOffset: Int64 = 0
        if let (i, info) = segment(containing: start) {
            first = i
            startOffset = Int64(start.rawValue - info.basePosition)
        }
        for i in first..<segments.count {
            var info = segments[i]
            if i == segments.count - 1, let w = writer { info = w.info }
            let from = i == first ? max(startOffset, info.dataStart) : info.dataStart
            guard from < info.size else { continue }
            let fd = try FileDescriptor.open(info.path, O_RDONLY)
            defer { fd.close() }
            fd.adviseSequential()
            var reader = SegmentReader(fd: fd, fileSize: info.size, from: from)
            while let step = try reader.nextRecord(version: info.header.version) {
                switch step {
                case .record(let record, let offset, _):
                    if try !body(LogPosition(info.basePosition + UInt64(offset)), record) { return }
                case .malformed(let offset, let problem):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .malformedRecord(problem))
                case .damage(let offset, let damage):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .damage(damage))
                }
            }
        }
    }
}
