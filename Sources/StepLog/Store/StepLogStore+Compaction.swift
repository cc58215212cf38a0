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
        try store.locked { try store.compactLocked(report: &report, progress: progress, stop: stop) }
        report.seconds = Date().timeIntervalSince(started)
        return report
    }

    /// Gives up the store object without touching its files again (after a
    /// compaction replaced them, or a simulated crash), releasing the lock as
    /// a dying process would.
    func abandon() {
        locked {
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
        let total = inputs.reduce(Int64(0)) { $0 + $1.size }
        try stop?(.started)

        let output = try CompactionOutput(
            directory: directory, firstSequence: inputs.last!.sequence + 1, basePosition: inputs.last!.endPosition,
            compactedThrough: inputs.last!.sequence, segmentSize: options.segmentSize, writeSnapshots: options.writeSnapshots,
            onSegmentWritten: { n in try stop?(.outputWritten(n)) })
        var before = StoreFigures()
        let frame = WriteBuffer(capacity: 4096)
        let group = WriteBuffer(capacity: 64 << 10)
        let rejectionPayload = WriteBuffer(capacity: 1024)
        var groupRecords: [(position: LogPosition, type: UInt8, start: Int, length: Int)] = []
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
            // Records go through in groups: each group is copied into `group`
            // while the index slots of its samples are prefetched, then judged
            // live or dead and written; the lookups' cache misses overlap.
            group.removeAll()
            groupRecords.removeAll(keepingCapacity: true)
            func drain() throws {
                let bytes = group.bytes
                for r in groupRecords {
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[r.start..<(r.start + r.length)])
                    before.records += 1
                    guard try state.isLive(type: r.type, payload: payload, at: r.position) else {
                        if Self.isSyncMark(r.type) { before.syncMarkBytes += Int64(FormatConstants.recordHeaderSize + r.length) }
                        continue
                    }
                    before.liveRecords += 1
                    frame.removeAll()
                    if r.type == RecordType.samplesRejected.rawValue, case .success(let list) = RejectionPayload.decode(payload) {
                        // Only the entries that still apply: a record can outlive some of its samples' versions.
                        let current = try list.filter { try state.isRejectionCurrent(UUIDBytes($0.id), recordedAt: r.position) }
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
                    if r.type == RecordType.sampleUpsert.rawValue, state.index.entry(SamplePayload.uuid(payload), at: r.position)?.isSynced == true {
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
            }
            while let item = try reader.next() {
                guard case .record(let offset, let type, let payload, _) = item else {
                    if case .damage(let offset, let damage) = item {
                        throw StepLogError.corruption(path: segment.path, offset: offset, reason: damage.description)
                    }
                    continue
                }
                if type == RecordType.sampleUpsert.rawValue, SamplePayload.isWellFormed(payload) {
                    state.index.prefetch(SamplePayload.uuid(payload))
                }
                groupRecords.append((LogPosition(segment.basePosition + UInt64(offset)), type, group.count, payload.count))
                group.append(payload)
                if groupRecords.count == 32 { try drain() }
            }
            try drain()
            read += segment.size
            progress?(read, total)
        }
        report.before = before
        report.bytesRead = read
        let outputs = try output.finish()
        // Every record written is live: the figures after follow from the copy.
        report.after.segments = outputs.count
        report.after.bytes = outputs.reduce(0) { $0 + $1.size }
        report.after.headerBytes = Int64(outputs.count * FormatConstants.dataStartV2)
        report.after.syncMarkBytes = output.syncMarkBytes
        report.after.liveBytes = before.liveBytes
        report.after.records = before.liveRecords + output.syncMarkRecords
        report.after.liveRecords = before.liveRecords

        // Switch: every output but the last under its final name, then the
        // last, flagged final, as the commit point.
        for (n, out) in outputs.dropLast().enumerated() {
            try Directory.rename(out.temporaryPath, to: out.finalPath)
            try stop?(.outputRenamed(n))
        }
        try Directory.sync(directory)
        let last = outputs.last!
        var finalHeader = last.header
        finalHeader.flags |= FormatConstants.segmentFlagCompactionFinal
        let fd = try FileDescriptor.open(last.temporaryPath, O_WRONLY)
        try finalHeader.encoded().withUnsafeBytes { try fd.write($0, at: 0) }
        try fd.sync()
        fd.close()
        try stop?(.finalHeaderWritten)
        try Directory.rename(last.temporaryPath, to: last.finalPath)
        try Directory.sync(directory)
        try stop?(.committed)

        // The inputs are now obsolete (a crash from here on is finished by the next open).
        for (n, input) in inputs.enumerated() {
            try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: input.sequence)))
            try Directory.remove(input.path)
            try stop?(.inputRemoved(n))
        }
        try Directory.sync(directory)
        try stop?(.finished)
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
