#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a checked snapshot file's sample entries a window at a time
/// (pread(2) into a buffer of its own), front to back.
///
/// Opening applies dozens of snapshots side by side, a band of hash range at a
/// time, so each must cost little memory while it waits for the next band:
/// one 64 KiB window. (A memory mapping cost more: the kernel maps large page
/// cache folios whole, megabytes ahead of where the reader is.)
public final class SnapshotEntryReader: @unchecked Sendable {
    /// Entries per window: 3,120 × 21 bytes = 65,520 bytes.
    public static let windowEntries = 3_120

    public let count: Int
    private let fd: FileDescriptor
    private let firstEntryOffset: Int64
    private let buffer: UnsafeMutableRawPointer
    /// Entries `windowStart ..< windowEnd` are in `buffer`.
    public private(set) var windowStart = 0
    public private(set) var windowEnd = 0
    /// The reader whose file this one reads (`sharingFile`), kept open by it.
    private let owner: SnapshotEntryReader?

    /// Takes ownership of `fd`, whose entries start at `firstEntryOffset`.
    init(fd: FileDescriptor, firstEntryOffset: Int64, count: Int) {
        self.fd = fd
        self.firstEntryOffset = firstEntryOffset
        self.count = count
        owner = nil
        buffer = UnsafeMutableRawPointer.allocate(byteCount: Self.windowEntries * FormatConstants.snapshotEntrySize, alignment: 64)
    }

    private init(sharing owner: SnapshotEntryReader) {
        fd = owner.fd
        firstEntryOffset = owner.firstEntryOffset
        count = owner.count
        self.owner = owner
        buffer = UnsafeMutableRawPointer.allocate(byteCount: Self.windowEntries * FormatConstants.snapshotEntrySize, alignment: 64)
    }

    deinit {
        buffer.deallocate()
        if owner == nil { fd.close() }
    }

    /// A reader of the same file with a window of its own, for another
    /// thread (pread(2) keeps no file offset, so both may read at once).
    public func sharingFile() -> SnapshotEntryReader { SnapshotEntryReader(sharing: owner ?? self) }

    /// The first entry whose UUID's `mixedHash` is at least `hash` (`count`
    /// if none): a binary search of the file, which is in hash order.
    public func firstEntry(hashAtLeast hash: UInt64) throws -> Int {
        var low = 0, high = count
        var uuid = [UInt8](repeating: 0, count: 16)
        while low < high {
            let middle = low + (high - low) / 2
            let read = try uuid.withUnsafeMutableBytes {
                try fd.read(into: $0.baseAddress!, count: 16, at: firstEntryOffset + Int64(middle * FormatConstants.snapshotEntrySize))
            }
            guard read == 16 else {
                throw StepLogError.io(operation: "read (snapshot shorter than when checked)", path: fd.path, errno: EIO)
            }
            if uuid.withUnsafeBytes({ SegmentSnapshot.SampleEntry.uuid(in: $0, index: 0) }).mixedHash < hash { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The window's bytes: entry `i` (windowStart ≤ i < windowEnd) is at
    /// `(i - windowStart) * snapshotEntrySize`.
    public var window: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: buffer, count: (windowEnd - windowStart) * FormatConstants.snapshotEntrySize)
    }

    /// Reads the window starting at entry `start`. Throws if the file is
    /// shorter than it was when checked.
    public func load(from start: Int) throws {
        let n = min(Self.windowEntries, count - start)
        let size = FormatConstants.snapshotEntrySize
        let read = try fd.read(into: buffer, count: n * size, at: firstEntryOffset + Int64(start * size))
        guard read == n * size else {
            throw StepLogError.io(operation: "read (snapshot shorter than when checked)", path: fd.path, errno: EIO)
        }
        windowStart = start
        windowEnd = start + n
    }
}
