import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The work of one compaction, whichever way it runs (offline in
/// `StepLogStore.compact(directory:)`, or beside the writer in
/// `compactInBackground`): copy what is live into outputs, commit them, and
/// remove the inputs. (When to compact is `CompactionPicker`'s to say; on
/// which thread, `CompactionScheduler`'s.)
struct CompactionExecutor {
    unowned let store: StepLogStore

    /// Copies what is live in `inputs` to `output`, in log order, counting
    /// what it read into `before`; returns the bytes read. Records go through
    /// in groups of `group`: each group is copied out of the read window and
    /// decoded once, then judged (`Liveness`) inside `judging` (which holds
    /// the state still: the mutex for a store in use, nothing more for a
    /// caller already holding it), with the index slots of its samples
    /// prefetched first so the lookups' cache misses overlap; framing and
    /// writing happen outside it.
    func copyLive(_ inputs: [SegmentInfo], to output: CompactionOutput, before: inout StoreFigures,
                  judging: (() -> Void) -> Void, group groupSize: Int = 32, checkpoint: () throws -> Void = {},
                  progress: ((Int64, Int64) -> Void)?) throws -> Int64 {
        let total = inputs.reduce(Int64(0)) { $0 + $1.size }
        let frame = WriteBuffer(capacity: 4096)
        let group = WriteBuffer(capacity: 64 << 10)
        var groupRecords: [(position: LogPosition, type: UInt8, start: Int, length: Int)] = []
        var records: [RecordView] = []
        var verdicts: [Liveness.Verdict] = []
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
                records.removeAll(keepingCapacity: true)
                for r in groupRecords {
                    let payload = UnsafeRawBufferPointer(rebasing: bytes[r.start..<(r.start + r.length)])
                    switch RecordView.decode(type: r.type, payload: payload, version: segment.header.version) {
                    case .success(let record): records.append(record)
                    case .failure(let problem):
                        throw StepLogError.corruption(path: segment.path, offset: Int64(r.position.rawValue - segment.basePosition),
                                                      kind: .malformedRecord(problem))
                    }
                }
                verdicts.removeAll(keepingCapacity: true)
                // Judging may read records (a tag match is confirmed against
                // the UUID on disk); its error is thrown once the state is let go.
                var failure: Error?
                judging {
                    do {
                        let state = store.state
                        for case .sampleUpsert(let sample) in records { state.index.prefetch(sample.uuid) }
                        for (r, record) in zip(groupRecords, records) {
                            verdicts.append(try Liveness.judge(record, at: r.position, in: state))
                        }
                    } catch {
                        failure = error
                    }
                }
                if let failure { throw failure }
                for (record, v) in zip(records, verdicts) {
                    before.records += 1
                    guard v.live else {
                        if v.isSyncMark { before.syncMarkBytes += Int64(record.frameSize) }
                        continue
                    }
                    before.liveRecords += 1
                    frame.removeAll()
                    Self.rewrite(record, as: v, to: frame)
                    // Live bytes are what is kept (rejection entries that no longer apply are dead).
                    before.liveBytes += Int64(frame.count)
                    try output.append(frame.bytes)
                }
                group.removeAll()
                groupRecords.removeAll(keepingCapacity: true)
                try checkpoint()
            }
            while let item = try reader.next() {
                switch item {
                case .record(let offset, let type, let payload, _):
                    groupRecords.append((LogPosition(segment.basePosition + UInt64(offset)), type, group.count, payload.count))
                    group.append(payload)
                    if groupRecords.count == groupSize { try drain() }
                case .damage(let offset, let damage):
                    throw StepLogError.corruption(path: segment.path, offset: offset, kind: .damage(damage))
                }
            }
            try drain()
            read += segment.size
            progress?(read, total)
        }
        return read
    }

    /// Frames what compaction keeps of a live `record`: its bytes as they
    /// are, with a sample's acknowledgement folded into its flags (or one taken
    /// back cleared from them), or only the
    /// entries of a samples-rejected record that still apply.
    static func rewrite(_ record: RecordView, as verdict: Liveness.Verdict, to frame: WriteBuffer) {
        if let current = verdict.currentRejections {
            RejectionPayload.append(current, to: frame)
            return
        }
        let payload = record.payload
        RecordFrame.append(record.type, payloadSize: payload.count, to: frame) { p in
            if let base = payload.baseAddress { p.copyMemory(from: base, byteCount: payload.count) }
            if verdict.foldsAcknowledgement { SamplePayload.setSynced(p) }
            if verdict.dropsAcknowledgement { SamplePayload.setSynced(p, false) }
        }
    }

    /// What a compaction leaves: every record written is live, so the
    /// figures follow from the copy.
    static func figuresAfter(_ outputs: [CompactionOutput.Segment], output: CompactionOutput, before: StoreFigures) -> StoreFigures {
        var after = StoreFigures()
        after.segments = outputs.count
        after.bytes = outputs.reduce(0) { $0 + $1.size }
        after.headerBytes = outputs.reduce(0) { $0 + $1.header.dataStart }
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
        let directory = store.directory
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
        let directory = store.directory
        for (n, input) in inputs.enumerated() {
            try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: input.sequence)))
            try Directory.remove(input.path)
            try stop?(.inputRemoved(n))
        }
        try Directory.sync(directory)
        try stop?(.finished)
    }
}
