/// Reads the records of one segment file in order through a bounded window
/// (4 MiB by default, grown only for a record larger than that), so scanning a
/// 10 GB store never holds more than a window in memory.
///
/// `next()` returns each checksummed record, then `nil` at a clean end, or
/// `.damage` once at the first place the bytes stop being a valid record; it
/// never skips past damage (after a bad checksum the length is not trusted).
public struct SegmentReader {
    public enum Item {
        /// A record whose checksum matched. `payload` is valid until the next call.
        case record(offset: Int64, type: UInt8, payload: UnsafeRawBufferPointer, size: Int)
        case damage(offset: Int64, SegmentDamage)
    }

    private let fd: FileDescriptor
    /// Bytes of the file this reader looks at (the file may be longer).
    public let fileSize: Int64
    /// Owns the window's memory; the hot path reads the fields below, which
    /// live in this struct (no class property access per record).
    private var allocation: WindowAllocation
    private var windowBase: UnsafeMutableRawPointer
    private var windowCapacity: Int
    private var windowCount = 0
    private let windowSize: Int
    /// File offset of the window's first byte.
    private var windowStart: Int64
    /// File offset of the next record; after the last one, where the data ends.
    public private(set) var offset: Int64
    private var stopped = false
    /// Set when the data ended in zero-filled space (preallocated by the writer).
    public private(set) var endedInZeros = false

    /// Reads `fd` from `offset` (a segment's `dataStart`, or a record's
    /// offset) up to `fileSize`.
    public init(fd: FileDescriptor, fileSize: Int64, from offset: Int64, windowSize: Int = 4 << 20) {
        self.fd = fd
        self.fileSize = fileSize
        self.offset = offset
        self.windowSize = windowSize
        allocation = WindowAllocation(capacity: Int(max(64, min(Int64(windowSize), fileSize - offset))))
        windowBase = allocation.base
        windowCapacity = allocation.capacity
        windowStart = offset
    }

    private var window: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: windowBase, count: windowCount) }

    /// Makes the window hold the bytes [offset, offset + minimum), or every byte
    /// up to `fileSize` when fewer remain. Returns the window offset of `offset`.
    private mutating func ensure(_ minimum: Int) throws -> Int {
        let wanted = Int(min(Int64(minimum), fileSize - offset))
        let at = Int(offset - windowStart)
        if offset >= windowStart && at + wanted <= windowCount { return at }
        let load = Int(min(Int64(max(windowSize, minimum)), fileSize - offset))
        if load > windowCapacity {
            allocation = WindowAllocation(capacity: load)
            windowBase = allocation.base
            windowCapacity = allocation.capacity
        }
        windowCount = try fd.read(into: windowBase, count: load, at: offset)
        windowStart = offset
        return 0
    }

    public mutating func next() throws -> Item? {
        if stopped || offset >= fileSize { return nil }
        var at = try ensure(RecordFrame.headerSize)
        var decoded = RecordFrame.decode(window, at: at)
        if case .truncatedPayload(let declared, _) = decoded {
            at = try ensure(RecordFrame.size(payload: declared))
            decoded = RecordFrame.decode(window, at: at)
        }
        let here = offset
        if case .record(let type, let payload, let size) = decoded {
            offset += Int64(size)
            return .record(offset: here, type: type, payload: payload, size: size)
        }
        stopped = true
        // Zero-filled space the writer prepared ahead of itself is the end of
        // the data, not damage: every byte from here to the end is zero.
        if try Self.lastNonZeroByte(in: fd, from: here, to: fileSize) == nil {
            endedInZeros = true
            return nil
        }
        return .damage(offset: here, SegmentDamage(decoded)!)
    }

    /// What `nextRecord` found.
    public enum Step {
        /// A record, decoded once: its view is valid until the next call.
        case record(RecordView, offset: Int64, size: Int)
        /// A record whose checksum matched but whose type the segment's
        /// version does not define, or whose payload is not its type's shape:
        /// never a torn write. Reading may go on after it.
        case malformed(offset: Int64, PayloadProblem)
        /// Where the bytes stop being a record (as `next` reports it).
        case damage(offset: Int64, SegmentDamage)
    }

    /// The next record, decoded once for a segment of format `version`
    /// (`RecordView.decode`), or nil at a clean end.
    @inline(__always)
    public mutating func nextRecord(version: UInt16) throws -> Step? {
        switch try next() {
        case nil:
            return nil
        case .record(let offset, let type, let payload, let size)?:
            switch RecordView.decode(type: type, payload: payload, version: version) {
            case .success(let view): return .record(view, offset: offset, size: size)
            case .failure(let problem): return .malformed(offset: offset, problem)
            }
        case .damage(let offset, let damage)?:
            return .damage(offset: offset, damage)
        }
    }

    /// Offset of the last non-zero byte in [from, to), or nil when all are zero.
    public static func lastNonZeroByte(in fd: FileDescriptor, from: Int64, to: Int64) throws -> Int64? {
        let chunk = 1 << 20
        let buffer = WindowAllocation(capacity: Int(max(1, min(Int64(chunk), to - from))))
        var end = to
        while end > from {
            let start = max(from, end - Int64(chunk))
            let n = try fd.read(into: buffer.base, count: Int(end - start), at: start)
            if let i = RecordFrame.lastNonZeroByte(in: UnsafeRawBufferPointer(start: buffer.base, count: n)) { return start + Int64(i) }
            end = start
        }
        return nil
    }
}

/// Memory of a reader's window, freed with the last reader copy.
final class WindowAllocation {
    let base: UnsafeMutableRawPointer
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        base = .allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }
}
