import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension StepLogStore {
    /// Compacts the store in `directory`: rewrites only what is live (the
    /// current version of each sample with its synced state folded in, each
    /// pending deletion's tombstone, the latest status of each interval,
    /// current layering ranges, each day's high score, the latest anchor of
    /// each source family) into new version 2 segments, switches to them
    /// atomically and deletes the old. Acknowledged deletions leave nothing.
    ///
    /// Offline: it takes the writer lock (another writer gets `.locked`).
    /// Streaming: it reads the input through a bounded window and writes
    /// through a 1 MiB buffer; beyond the index it holds a few MiB.
    /// Crash-safe at every step: outputs are written as temporary files and the
    /// last one, flagged final, is renamed into place last (the commit); opening
    /// finishes a committed compaction (deletes the inputs left) and discards an
    /// uncommitted one. `stop` (tests) can end it after any `CompactionStep`.
    public static func compact(directory: String, options: StoreOptions = StoreOptions(),
                               progress: ((_ read: Int64, _ total: Int64) -> Void)? = nil,
                               stop: ((CompactionStep) throws -> Void)? = nil) throws -> CompactionReport {
        let started = Date()
        let store = try StepLogStore.open(directory, options: options)
        var report = CompactionReport()
        defer { store.abandon() }
        // None in the background beside this one (by dead bytes at open, or a request file the timer finds).
        store.compactor.stop()
        try store.locked { try store.compactLocked(report: &report, progress: progress, stop: stop) }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Gives up the store object without touching its files again (after a
    /// compaction replaced them, or a simulated crash), releasing the lock as
    /// a dying process would.
    func abandon() {
        compactor.stop()
        locked {
            syncer.drain()
            snapshots.wait()
            writer?.stopPreallocating()
            writer?.close()
            writer = nil
            readers.closeAll()
            isClosed = true
            releaseLock()
        }
    }

    private func compactLocked(report: inout CompactionReport, progress: ((Int64, Int64) -> Void)?,
                               stop: ((CompactionStep) throws -> Void)?) throws {
        let w = try writableWriter()
        try w.sync()
        try w.trimZeroFill()
        snapshots.wait()
        var inputs = segments
        inputs[inputs.count - 1] = w.info
        try stop?(.started)

        let output = try CompactionOutput(
            directory: directory, firstSequence: inputs.last!.sequence + 1, basePosition: inputs.last!.endPosition,
            compactedThrough: inputs.last!.sequence, segmentSize: options.segmentSize, writeSnapshots: options.writeSnapshots,
            onSegmentWritten: { n in try stop?(.outputWritten(n)) })
        var before = StoreFigures()
        let read = try copyLive(inputs, to: output, before: &before, judging: { $0() }, progress: progress)
        report.before = before
        report.bytesRead = read
        let outputs = try output.finish()
        report.after = Self.figuresAfter(outputs, output: output, before: before)
        _ = try commit(outputs, rangeEnd: 0, stop: stop)
        try removeInputs(inputs, stop: stop)
    }

    /// What a compaction leaves: every record written is live, so the
    /// figures follow from the copy.
    static func figuresAfter(_ outputs: [CompactionOutput.Segment], output: CompactionOutput, before: StoreFigures) -> StoreFigures {
        var after = StoreFigures()
        after.segments = outputs.count
        after.bytes = outputs.reduce(0) { $0 + $1.size }
        after.headerBytes = Int64(outputs.count * FormatConstants.dataStartV2)
        after.syncMarkBytes = output.syncMarkBytes
        after.liveBytes = before.liveBytes
        after.records = before.liveRecords + output.syncMarkRecords
        after.liveRecords = before.liveRecords
        return after
    }

    /// The switch on disk: every output but the last under its final name,
    /// then the last, flagged final (with `rangeEnd`, when the writer went on
    /// past a reservation), as the commit point. Returns the outputs as live
    /// segments.
    func commit(_ outputs: [CompactionOutput.Segment], rangeEnd: UInt64,
                stop: ((CompactionStep) throws -> Void)?) throws -> [SegmentInfo] {
        var live: [SegmentInfo] = []
        for (n, out) in outputs.dropLast().enumerated() {
            try Directory.rename(out.temporaryPath, to: out.finalPath)
            live.append(SegmentInfo(header: out.header, path: out.finalPath, size: out.size))
            try stop?(.outputRenamed(n))
        }
        try Directory.sync(directory)
        let last = outputs.last!
        var finalHeader = last.header
        finalHeader.flags |= FormatConstants.segmentFlagCompactionFinal
        finalHeader.rangeEnd = rangeEnd
        let fd = try FileDescriptor.open(last.temporaryPath, O_WRONLY)
        defer { fd.close() }
        try finalHeader.encoded().withUnsafeBytes { try fd.write($0, at: 0) }
        try fd.sync()
        try stop?(.finalHeaderWritten)
        try Directory.rename(last.temporaryPath, to: last.finalPath)
        try Directory.sync(directory)
        live.append(SegmentInfo(header: finalHeader, path: last.finalPath, size: last.size))
        try stop?(.committed)
        return live
    }

    /// Deletes a committed compaction's inputs and their snapshots (a crash
    /// from here on is finished by the next open).
    func removeInputs(_ inputs: [SegmentInfo], stop: ((CompactionStep) throws -> Void)?) throws {
        for (n, input) in inputs.enumerated() {
            try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: input.sequence)))
            try Directory.remove(input.path)
            try stop?(.inputRemoved(n))
        }
        try Directory.sync(directory)
        try stop?(.finished)
    }

    /// What a compaction decides about one record it read.
    struct Verdict {
        var live = false
        /// A sample version whose acknowledgement is folded into its flags.
        var synced = false
        /// For a samples-rejected record: the entries that still apply.
        var rejections: [SampleRejection]?
    }

    /// Copies what is live in `inputs` to `output`, in log order, counting
    /// what it read into `before`; returns the bytes read. Records go through
    /// in groups of `group`: each group is copied out of the read window,
    /// then judged inside `judging` (which holds the state still: the mutex
    /// for a store in use, nothing more for a caller already holding it),
    /// with the index slots of its samples prefetched first so the lookups'
    /// cache misses overlap; framing and writing happen outside it.
    func copyLive(_ inputs: [SegmentInfo], to output: CompactionOutput, before: inout StoreFigures,
                  judging: (() -> Void) -> Void, group groupSize: Int = 32, checkpoint: () throws -> Void = {},
                  progress: ((Int64, Int64) -> Void)?) throws -> Int64 {
        let total = inputs.reduce(Int64(0)) { $0 + $1.size }
        let frame = WriteBuffer(capacity: 4096)
        let group = WriteBuffer(capacity: 64 << 10)
        let rejectionPayload = WriteBuffer(capacity: 1024)
        var groupRecords: [(position: LogPosition, type: UInt8, start: Int, length: Int)] = []
        var verdicts: [Verdict] = []
        var read: Int64 = 0
        for segment in inputs {
            before.segments += 1
            before.bytes += segment.size
            before.headerBytes += segment.dataStart
            let fd = try FileDescriptor.open(segment.path, O_RDONLY)
            defer { fd.close() }
            fd.adviseSequential()
            // A 1 MiB window: compaction's memory budget is the index plus 64 MiB.
            var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart, windowSize: 1 << 20)
            group.removeAll()
            groupRecords.removeAll(keepingCapacity: true)
            func drain() throws {
                let bytes = group.bytes
                verdicts.removeAll(keepingCapacity: true)
                // Judging may read records (a tag match is confirmed against
                // the UUID on disk); its error is thrown once the state is let go.
                var failure: Error?
                judging {
                    do {
                        let state = self.state
                        for r in groupRecords where r.type == RecordType.sampleUpsert.rawValue {
                            let payload = UnsafeRawBufferPointer(rebasing: bytes[r.start..<(r.start + r.length)])
                            if SamplePayload.isWellFormed(payload) { state.index.prefetch(SamplePayload.uuid(payload)) }
                        }
                        for r in groupRecords {
                            let payload = UnsafeRawBufferPointer(rebasing: bytes[r.start..<(r.start + r.length)])
                            var v = Verdict()
                            v.live = try state.isLive(type: r.type, payload: payload, at: r.position)
                            if v.live, r.type == RecordType.sampleUpsert.rawValue {
                                // The record at r.position carries this UUID: no read confirms it.
                                v.synced = state.index.entry(SamplePayload.uuid(payload), at: r.position)?.isSynced == true
                            }
                            if v.live, r.type == RecordType.samplesRejected.rawValue, case .success(let list) = RejectionPayload.decode(payload) {
                                // Only the entries that still apply: a record can outlive some of its samples' versions.
                                v.rejections = try list.filter { try state.isRejectionCurrent(UUIDBytes($0.id), recordedAt: r.position) }
                            }
                            verdicts.append(v)
                        }
                    } catch {
                        failure = error
                    }
                }
                if let failure { throw failure }
                for (r, v) in zip(groupRecords, verdicts) {
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[r.start..<(r.start + r.length)])
                    before.records += 1
                    guard v.live else {
                        if Self.isSyncMark(r.type) { before.syncMarkBytes += Int64(FormatConstants.recordHeaderSize + r.length) }
                        continue
                    }
                    before.liveRecords += 1
                    frame.removeAll()
                    if let current = v.rejections {
                        rejectionPayload.removeAll()
                        RejectionPayload.appendPayload(current, to: rejectionPayload)
                        frame.append(UInt32(rejectionPayload.count))
                        frame.append(r.type)
                        frame.append(UInt32(0))
                        frame.append(UnsafeRawBufferPointer(rejectionPayload.bytes))
                    } else {
                        frame.append(UInt32(payload.count))
                        frame.append(r.type)
                        frame.append(UInt32(0))
                        frame.append(payload)
                    }
                    if v.synced {
                        // Fold the synced marker into the version: the same bytes with the flag set.
                        let at = FormatConstants.recordHeaderSize + SamplePayload.flagsOffset
                        frame.set(frame.bytes[at] | FormatConstants.sampleFlagSynced, at: at)
                    }
                    // Live bytes are what is kept (rejection entries that no longer apply are dead).
                    before.liveBytes += Int64(frame.count)
                    let body = UnsafeRawBufferPointer(rebasing: frame.bytes[FormatConstants.recordHeaderSize...])
                    var crc = withUnsafeBytes(of: r.type) { CRC32C.extend(0, $0) }
                    crc = CRC32C.extend(crc, body)
                    frame.set(CRC32C.mask(crc), at: 5)
                    try output.append(frame.bytes)
                }
                group.removeAll()
                groupRecords.removeAll(keepingCapacity: true)
                try checkpoint()
            }
            while let item = try reader.next() {
                guard case .record(let offset, let type, let payload, _) = item else {
                    if case .damage(let offset, let damage) = item {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: damage.description)
                    }
                    continue
                }
                groupRecords.append((LogPosition(segment.basePosition + UInt64(offset)), type, group.count, payload.count))
                group.append(payload)
                if groupRecords.count == groupSize { try drain() }
            }
            try drain()
            read += segment.size
            progress?(read, total)
        }
        return read
    }

    /// Synced-through and padding records: what durability costs, counted
    /// apart from dead records (compaction drops them but its last output
    /// ends with one synced-through record of its own).
    static func isSyncMark(_ type: UInt8) -> Bool {
        type == RecordType.syncedThrough.rawValue || type == RecordType.padding.rawValue
    }

    /// Segments, bytes, records and live records of the store as it is,
    /// from one pass over every record.
    public func figures() throws -> StoreFigures {
        try locked {
            var f = StoreFigures()
            for (i, s) in segments.enumerated() {
                f.segments += 1
                f.bytes += (i == segments.count - 1 && writer != nil) ? writer!.endOffset : s.size
                f.headerBytes += s.dataStart
            }
            try scan(from: .zero) { position, type, payload in
                let size = Int64(FormatConstants.recordHeaderSize + payload.count)
                let live = try state.isLive(type: type, payload: payload, at: position)
                f.records += 1
                if Self.isSyncMark(type) { f.syncMarkBytes += size }
                // A rejection record's entries that no longer apply are dead bytes (compaction leaves them out).
                let liveSize = !live ? 0 : type == RecordType.samplesRejected.rawValue
                    ? Int64(FormatConstants.recordHeaderSize + (try state.liveRejectionPayloadSize(payload, at: position))) : size
                if live {
                    f.liveRecords += 1
                    f.liveBytes += liveSize
                }
                if let t = RecordType(rawValue: type) {
                    f.byType[t, default: StoreFigures.TypeFigures()].records += 1
                    f.byType[t]!.bytes += size
                    if live {
                        f.byType[t]!.liveRecords += 1
                        f.byType[t]!.liveBytes += liveSize
                    }
                }
                return true
            }
            return f
        }
    }
}
