import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension StepLogStore {
    /// Compacts every sealed segment while the store stays in use: other
    /// threads keep upserting, syncing and reading throughout, and wait on
    /// the store's mutex only for short moments (docs/IMPL.md, "Compaction
    /// in the background"):
    ///
    /// 1. **Reserve** (mutex): the writer's segment *k* is sealed and the
    ///    writer goes on in a segment numbered past `k + R` and starting past
    ///    a range of positions reserved for the outputs (flag "after a
    ///    reservation"), so the outputs sort before everything written meanwhile.
    /// 2. **Copy** (no mutex): segments up to *k* are read and what is live is
    ///    written to the outputs (`N.log.tmp`). Each group of records is judged
    ///    against the current state under the mutex (a few microseconds): a
    ///    record superseded meanwhile is dropped, since its successor is in the
    ///    writer's newer segments, which stay.
    /// 3. **Commit** (no mutex): renames as `compact(directory:)` does; the last
    ///    output carries the final flag and, as range end, the writer's base.
    /// 4. **Rebuild** (no mutex): a new state is replayed from the outputs
    ///    (their snapshots) and then from the writer's segments, in rounds,
    ///    while the writer goes on.
    /// 5. **Switch** (mutex): the records appended since the last round are
    ///    replayed, and the store takes the new state and segment list.
    ///    Reads are made under the mutex, so none sees a removed file.
    /// 6. **Retire** (no mutex): the inputs and their snapshots are deleted.
    ///
    /// A crash at any step leaves what `compact(directory:)` leaves: the next
    /// open finishes a committed compaction or discards its outputs. An error
    /// before the commit discards the outputs and leaves the store as it was;
    /// an error after it fails the store (reopen it). `stop` (tests) can end
    /// it after any `CompactionStep`. Returns what the copy found and wrote
    /// (records appended meanwhile are counted in neither).
    public func compactInBackground(progress: ((_ read: Int64, _ total: Int64) -> Void)? = nil,
                                    stop: ((CompactionStep) throws -> Void)? = nil) throws -> CompactionReport {
        let started = Date()
        // 1. Reserve.
        let plan = try locked { () throws -> Reservation in
            let w = try writableWriter()
            let k = w.info.sequence
            // The inputs are every live segment, the writer's as sealing leaves
            // it (sealing writes out what is pending and adds nothing). What the
            // outputs may need follows from the inputs' record bytes, not from
            // how many inputs there are: inputs written with larger segments (by
            // another writer's options, or compacted offline at the default size)
            // each fill many outputs.
            let recordBytes = segments.dropLast().reduce(w.endOffset - w.info.dataStart) { $0 + ($1.size - $1.dataStart) }
            let bound = CompactionOutput.bound(recordBytes: recordBytes, segmentSize: options.segmentSize)
            guard k < FormatConstants.maxSequence - bound.segments else {
                throw StepLogError.compactionAbandoned(path: directory, reason: "the sequence numbers are exhausted (the writer's segment is \(k))")
            }
            let outputsStart = w.endPosition
            let base = outputsStart + bound.bytes
            let header = SegmentHeader(sequence: k + bound.segments + 1, basePosition: base, flags: FormatConstants.segmentFlagAfterReservation,
                                       compactedThrough: k)
            do { _ = try roll(nextHeader: header) } catch { throw fail(error) }
            let inputs = Array(segments.prefix { $0.sequence <= k })
            assert(inputs.last?.endPosition == outputsStart, "sealing the writer's segment changed its end")
            return Reservation(inputs: inputs, lastSequence: k + bound.segments, writerBase: base)
        }
        try checkStopping()
        snapshots.wait() // no snapshot of an input is being written when the inputs are deleted
        try stop?(.started)

        // 2. Copy.
        var report = CompactionReport()
        var outputs: [CompactionOutput.Segment] = []
        let last = plan.inputs.last!
        var before = StoreFigures()
        var output: CompactionOutput?
        let executor = CompactionExecutor(store: self)
        do {
            let out = try CompactionOutput(
                directory: directory, firstSequence: last.sequence + 1, basePosition: last.endPosition,
                compactedThrough: last.sequence, segmentSize: options.segmentSize, writeSnapshots: options.writeSnapshots,
                reserved: (plan.lastSequence, plan.writerBase), onSegmentWritten: { n in try stop?(.outputWritten(n)) })
            output = out
            report.bytesRead = try executor.copyLive(plan.inputs, to: out, before: &before, judging: { body in locked(body) }, group: 256,
                                                     checkpoint: { try checkStopping() }, progress: progress)
            outputs = try out.finish()
        } catch {
            // Nothing committed: the temporary outputs go (the next open would remove them too).
            for o in (output?.finished ?? []) { try? Directory.remove(o.temporaryPath) }
            throw error
        }
        report.before = before
        report.after = CompactionExecutor.figuresAfter(outputs, output: output!, before: before)
        // 3. Commit (a failure while renaming may or may not have committed: the next open decides).
        let live: [SegmentInfo]
        do { live = try executor.commit(outputs, rangeEnd: plan.writerBase, stop: stop) } catch { throw locked { fail(error) } }

        // 4-5. Rebuild and switch; from the commit on, an error fails the store.
        do {
            report.switchSeconds = try switchOver(to: live, replacing: plan.inputs, writerBase: plan.writerBase)
        } catch {
            throw locked { fail(error) }
        }
        // 6. Retire.
        try executor.removeInputs(plan.inputs, stop: stop)
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    struct Reservation {
        var inputs: [SegmentInfo]
        var lastSequence: UInt64
        var writerBase: UInt64
    }

    private func checkStopping() throws {
        if scheduler.isStopping { throw StepLogError.compactionAbandoned(path: directory, reason: "the store is closing") }
    }

    /// Replays the committed outputs, then the writer's segments (in rounds
    /// outside the mutex, the last inside it), into a new state, and
    /// switches the store to it. Returns how long the switch held the mutex.
    private func switchOver(to live: [SegmentInfo], replacing inputs: [SegmentInfo], writerBase: UInt64) throws -> Double {
        let fresh = StoreState(indexHash: options.indexHash)
        // The new index confirms tag matches against the committed outputs,
        // and against the writer's segments as each round finds them (their
        // records replayed so far are in their files; the switch flushes first).
        let liveKeys = SegmentKeyReader(segments: live)
        var writerKeys = SegmentKeyReader(segments: [])
        fresh.index.keyAt = { position in
            try position.rawValue < writerBase ? liveKeys.key(at: position) : writerKeys.key(at: position)
        }
        var pipeline = ReplayPipeline(segments: live)
        pipeline.directory = directory
        pipeline.bandBytes = options.snapshotBandBytes
        pipeline.parallelEntries = options.snapshotParallelEntries
        if options.useSnapshots && options.writeSnapshots { pipeline.snapshots = Set(live.indices.dropLast()) }
        var openReport = OpenReport()
        let keys = locked { state.index.count }
        let outcome = try pipeline.run(into: fresh, expectedKeys: keys, report: &openReport)
        if case .damaged(let i, let offset, let kind) = outcome {
            throw StepLogError.corruption(path: live[i].path, offset: offset, kind: kind)
        }
        try fresh.finishReplay()

        // The writer's segments: what was appended while the copy ran.
        // Rounds until one finds less than 1 MiB new: what is left for the
        // switch (under the mutex) is about what the writer appends while a
        // round replays 1 MiB. A writer that outpaces the replay for 10,000
        // rounds gets a longer switch rather than no compaction.
        var cursor = LogPosition(writerBase)
        for _ in 0..<10_000 {
            let infos = locked { writerSegments(from: writerBase) }
            writerKeys = SegmentKeyReader(segments: infos)
            let replayed = try replayRange(infos, from: &cursor, into: fresh)
            if replayed < 1 << 20 { break }
        }
        return try locked {
            let started = DispatchTime.now().uptimeNanoseconds
            if let w = writer { do { try w.flush() } catch { throw fail(error) } }
            let infos = writerSegments(from: writerBase)
            writerKeys = SegmentKeyReader(segments: infos)
            _ = try replayRange(infos, from: &cursor, into: fresh)
            try fresh.finishReplay()
            let inputSequences = Set(inputs.map(\.sequence))
            state = fresh
            state.index.keyAt = { [unowned self] position in try self.sampleKey(at: position) }
            segments = live + segments.filter { $0.basePosition >= writerBase }
            for sequence in inputSequences { readers.forget(sequence) }
            return Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        }
    }

    /// The segments from `base` on, the writer's with the bytes written to
    /// its file so far (call with the mutex held).
    private func writerSegments(from base: UInt64) -> [SegmentInfo] {
        var result = segments.filter { $0.basePosition >= base }
        if let w = writer, !result.isEmpty { result[result.count - 1] = w.info }
        return result
    }

    /// Replays the records of `infos` from `cursor` to their current ends into
    /// `state`, moving `cursor`; returns the bytes read.
    private func replayRange(_ infos: [SegmentInfo], from cursor: inout LogPosition, into state: StoreState) throws -> Int64 {
        var bytes: Int64 = 0
        for info in infos where info.endPosition > cursor.rawValue {
            let from = max(info.dataStart, cursor.rawValue > info.basePosition ? Int64(cursor.rawValue - info.basePosition) : 0)
            guard from < info.size else { continue }
            let fd = try FileDescriptor.open(info.path, O_RDONLY)
            defer { fd.close() }
            var reader = SegmentReader(fd: fd, fileSize: info.size, from: from, windowSize: 1 << 20)
            while let step = try reader.nextRecord(version: info.header.version) {
                switch step {
                case .record(let record, let offset, _):
                    try state.replay(record, at: LogPosition(info.basePosition + UInt64(offset)))
                case .malformed(let offset, let problem):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .malformedRecord(problem))
                case .damage(let offset, let damage):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .damage(damage))
                }
            }
            bytes += info.size - from
            cursor = LogPosition(info.endPosition)
        }
        return bytes
    }
}
