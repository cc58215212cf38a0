#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// Writes compaction output segments under temporary names (`N.log.tmp`),
/// each flagged as a compaction output replacing segments up to
/// `compactedThrough`, rolling at the segment size, each synced when full.
/// The last output, which becomes the newest segment, ends with a
/// `syncedThrough` record vouching for all of it: its bytes are acknowledged
/// data, and damage in them must be corruption, not an unsynced tail.
///
/// Every record written is live and each sample appears once, so a sealed
/// output's index snapshot is just the entries collected while writing it,
/// sorted: it is written when the output is sealed (named for its sequence;
/// if the compaction never commits, the next open removes it as an orphan).
final class CompactionOutput {
    struct Segment {
        var header: SegmentHeader
        var temporaryPath: String
        var finalPath: String
        var size: Int64
    }

    private let directory: String
    private let segmentSize: Int64
    private let compactedThrough: UInt64
    private let buffer = WriteBuffer(capacity: 1 << 20)
    private var fd: FileDescriptor?
    private(set) var finished: [Segment] = []
    private var current: Segment?
    private let onSegmentWritten: (Int) throws -> Void
    private let writeSnapshots: Bool
    /// The last sequence and the end of the positions reserved for the
    /// outputs (a compaction running beside the writer), or nil: unbounded.
    private let reserved: (sequence: UInt64, position: UInt64)?
    /// Sealed outputs are synced, and their snapshots written, here, while
    /// the copy goes on; `finish` waits for them.
    private let background = DispatchQueue(label: "steplog.compaction.seal", qos: .userInitiated)
    private let backgroundError = FirstError()
    private var snapshotSamples: [SegmentSnapshot.SampleEntry] = []
    /// Samples written to all outputs so far (each exactly once).
    private var samplesWritten = 0
    private var snapshotOthers: [SegmentSnapshot.OtherRecord] = []
    /// The closing synced-through record of the last output.
    private(set) var syncMarkBytes: Int64 = 0
    private(set) var syncMarkRecords = 0

    init(directory: String, firstSequence: UInt64, basePosition: UInt64, compactedThrough: UInt64, segmentSize: Int,
         writeSnapshots: Bool, reserved: (sequence: UInt64, position: UInt64)? = nil,
         onSegmentWritten: @escaping (Int) throws -> Void) throws {
        self.reserved = reserved
        self.directory = directory
        self.segmentSize = Int64(segmentSize)
        self.compactedThrough = compactedThrough
        self.writeSnapshots = writeSnapshots
        self.onSegmentWritten = onSegmentWritten
        try start(sequence: firstSequence, base: basePosition)
    }

    /// The most outputs, and the most bytes they take together, that a copy
    /// of inputs holding `recordBytes` bytes of records (their segments' sizes
    /// less their data starts) can write when outputs roll at `segmentSize`:
    /// what a compaction beside the writer reserves (sequence numbers, and
    /// positions from the end of its last input on).
    ///
    /// The inputs' own segment size does not enter: what is copied is at most
    /// their record bytes (a record is copied as it is, its synced flag set,
    /// or a samples-rejected record with fewer entries), and only those bytes
    /// and this segment size decide how many outputs they fill. With
    /// `capacity` = `segmentSize` less the header block, an output is sealed
    /// only when it holds records and the next record does not fit beside them
    /// (`append`), so any two consecutive outputs holding copied records hold
    /// more than `capacity` between them, and the n that hold the copied bytes
    /// B satisfy ⌊n/2⌋·capacity < B: n ≤ 2⌈B / capacity⌉ (records a little over
    /// half a capacity each come close to it). Two more: the first output,
    /// started even when nothing is live, and the one `finish` starts when the
    /// closing records do not fit in the last. Their bytes: a header block
    /// each, the records, the closing padding (under a sector and a record
    /// header) and synced-through record.
    static func bound(recordBytes: Int64, segmentSize: Int) -> (segments: UInt64, bytes: UInt64) {
        let capacity = Int64(segmentSize - FormatConstants.dataStartV2)
        let records = max(0, recordBytes)
        let segments = UInt64(2 * ((records + capacity - 1) / capacity) + 2)
        let closing = UInt64(FormatConstants.paddingSector + RecordFrame.headerSize - 1) + UInt64(SyncedThroughPayload.frameSize)
        return (segments, segments * UInt64(FormatConstants.dataStartV2) + UInt64(records) + closing)
    }

    private func start(sequence: UInt64, base: UInt64) throws {
        guard sequence <= FormatConstants.maxSequence else {
            throw StepLogError.compactionAbandoned(path: directory, reason: "the sequence numbers are exhausted (\(sequence) is past the last a segment may carry)")
        }
        if let reserved, sequence > reserved.sequence || base >= reserved.position {
            throw StepLogError.compactionAbandoned(path: directory, reason: "the outputs outgrew the sequences and positions reserved for them")
        }
        let header = SegmentHeader(sequence: sequence, basePosition: base, flags: FormatConstants.segmentFlagCompactionOutput,
                                   compactedThrough: compactedThrough)
        let final = Directory.join(directory, SegmentName.fileName(sequence: sequence))
        let temporary = final + FormatConstants.temporarySuffix
        let file = try FileDescriptor.open(temporary, O_RDWR | O_CREAT | O_TRUNC)
        fd = file
        let bytes = header.encodedBlock()
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        current = Segment(header: header, temporaryPath: temporary, finalPath: final, size: Int64(bytes.count))
    }

    /// Appends one framed record (its bytes as they go to disk), and notes
    /// what it puts in the output's snapshot, read back from those bytes.
    func append(_ frame: UnsafeRawBufferPointer) throws {
        let c = current!
        if c.size + Int64(buffer.count + frame.count) > segmentSize && c.size + Int64(buffer.count) > c.header.dataStart {
            try roll()
        }
        if writeSnapshots {
            let offset = UInt32(current!.size + Int64(buffer.count))
            guard case .record(let type, let payload, _) = RecordFrame.decode(frame, at: 0),
                  case .success(let record) = RecordView.decode(type: type, payload: payload) else {
                preconditionFailure("compaction framed a record that does not decode")
            }
            switch SegmentSnapshot.Contribution.of(record) {
            case .version(let uuid, let flags):
                snapshotSamples.append(SegmentSnapshot.SampleEntry(uuid: uuid, offset: offset, flags: flags))
                samplesWritten += 1
            case .acknowledgements, .unacknowledgements:
                preconditionFailure("compaction copies no acknowledgement or its loss (they are folded into the versions)")
            case .verbatim:
                snapshotOthers.append(SegmentSnapshot.OtherRecord(offset: offset, type: type, payload: Array(payload)))
            case .nothing:
                break
            }
        }
        buffer.append(frame)
        if buffer.count >= 1 << 20 { try flush() }
    }

    private func flush() throws {
        guard buffer.count > 0, let file = fd else { return }
        try file.write(buffer.bytes, at: current!.size)
        current!.size += Int64(buffer.count)
        buffer.removeAll()
    }

    /// Seals the current output (synced, and its snapshot written, in the
    /// background: it is not the last), then starts the next.
    private func roll() throws {
        let done = try seal(last: false)
        try start(sequence: done.header.sequence + 1, base: done.header.basePosition + UInt64(done.size))
    }

    private func seal(last: Bool) throws -> Segment {
        try flush()
        let done = current!
        let file = fd!
        fd = nil
        current = nil
        finished.append(done)
        let samples = snapshotSamples, others = snapshotOthers, keys = samplesWritten
        snapshotSamples = []
        snapshotOthers = []
        let snapshot = writeSnapshots && !last
        let directory = self.directory
        let failure = backgroundError
        let work: @Sendable () -> Void = {
            do {
                try file.sync()
                if snapshot {
                    let order = SegmentSnapshot.hashOrder(samples)
                    try SegmentSnapshot(sequence: done.header.sequence, basePosition: done.header.basePosition,
                                        segmentSize: UInt64(done.size),
                                        tailChecksum: try SegmentSnapshot.tailChecksum(file, dataStart: done.header.dataStart, size: done.size),
                                        keysAfter: UInt64(keys), samples: [], others: others)
                        .write(directory: directory, count: samples.count, entry: { samples[Int(order[$0])] })
                }
            } catch {
                failure.record(error)
            }
            file.close()
        }
        // One sealed output in the background at a time: its entries and sort
        // are the compaction's largest buffers.
        background.sync {}
        if last { work() } else { background.async(execute: work) }
        try onSegmentWritten(finished.count - 1)
        return done
    }

    /// Waits for the background syncs and snapshots; rethrows their first error.
    private func waitForBackground() throws {
        background.sync {}
        if let error = backgroundError.first { throw error }
    }

    /// Seals the last output (the newest segment: always replayed, so no
    /// snapshot) and returns every output, in order.
    func finish() throws -> [Segment] {
        // Synced with the rest of the output before the commit, so the claim holds.
        // Padded first to a sector boundary, as the writer pads its syncs: the
        // next writer appends right after the record, and a torn append may
        // garble its sector — which then holds only the record, never the
        // output's data (the crash checker's strict model found that).
        let frame = WriteBuffer(capacity: 1024)
        var end = current!.size + Int64(buffer.count)
        var gap = PaddingPayload.frameSize(aligning: end)
        if end + gap + Int64(SyncedThroughPayload.frameSize) > segmentSize {
            try roll() // a new output starts at its data start, on a sector boundary
            end = current!.size + Int64(buffer.count)
            gap = 0
        }
        if gap > 0 {
            PaddingPayload.append(frameSize: gap, to: frame)
            try append(frame.bytes)
            frame.removeAll()
        }
        SyncedThroughPayload.append(offset: UInt64(end + gap), to: frame)
        try append(frame.bytes)
        syncMarkBytes = gap + Int64(frame.count)
        syncMarkRecords = gap > 0 ? 2 : 1
        let last = try seal(last: true)
        try waitForBackground()
        if let reserved, last.header.basePosition + UInt64(last.size) > reserved.position {
            throw StepLogError.compactionAbandoned(path: directory, reason: "the outputs outgrew the positions reserved for them")
        }
        return finished
    }

    deinit { background.sync {} }
}

/// The first error of a set of background jobs.
final class FirstError: @unchecked Sendable {
    private let lock = NSLock()
    private var error: Error?

    func record(_ e: Error) { lock.withLock { if error == nil { error = e } } }

    var first: Error? { lock.withLock { error } }
}
