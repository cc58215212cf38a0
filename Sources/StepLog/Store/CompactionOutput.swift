#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes compaction output segments under temporary names (`N.log.tmp`),
/// each flagged as a compaction output replacing segments up to
/// `compactedThrough`, rolling at the segment size, each synced when full.
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

    init(directory: String, firstSequence: UInt64, basePosition: UInt64, compactedThrough: UInt64, segmentSize: Int,
         onSegmentWritten: @escaping (Int) throws -> Void) throws {
        self.directory = directory
        self.segmentSize = Int64(segmentSize)
        self.compactedThrough = compactedThrough
        self.onSegmentWritten = onSegmentWritten
        try start(sequence: firstSequence, base: basePosition)
    }

    private func start(sequence: UInt64, base: UInt64) throws {
        let header = SegmentHeader(sequence: sequence, basePosition: base, flags: FormatConstants.segmentFlagCompactionOutput,
                                   compactedThrough: compactedThrough)
        let final = Directory.join(directory, SegmentName.fileName(sequence: sequence))
        let temporary = final + FormatConstants.temporarySuffix
        let file = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        fd = file
        let bytes = header.encoded()
        try bytes.withUnsafeBytes { try file.write($0, at: 0) }
        current = Segment(header: header, temporaryPath: temporary, finalPath: final, size: Int64(bytes.count))
    }

    /// Appends one framed record (its bytes as they go to disk).
    func append(_ frame: UnsafeRawBufferPointer) throws {
        let c = current!
        if c.size + Int64(buffer.count + frame.count) > segmentSize && c.size + Int64(buffer.count) > Int64(FormatConstants.segmentHeaderSize) {
            try roll()
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

    /// Syncs and closes the current output, then starts the next.
    private func roll() throws {
        let done = try seal()
        try start(sequence: done.header.sequence + 1, base: done.header.basePosition + UInt64(done.size))
    }

    private func seal() throws -> Segment {
        try flush()
        try fd!.sync()
        fd!.close()
        fd = nil
        let done = current!
        finished.append(done)
        current = nil
        try onSegmentWritten(finished.count - 1)
        return done
    }

    /// Seals the last output and returns every output, in order.
    func finish() throws -> [Segment] {
        _ = try seal()
        return finished
    }
}
