#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends records to the newest segment. Records are encoded into `pending`
/// and reach the file on `flush` (one pwrite) and stable storage on `sync`.
final class SegmentWriter {
    private(set) var info: SegmentInfo
    var fd: FileDescriptor
    /// Encoded records not yet written to the file.
    let pending = WriteBuffer(capacity: 1 << 20)
    /// File size known to be on stable storage.
    private(set) var syncedSize: Int64

    private init(info: SegmentInfo, fd: FileDescriptor, syncedSize: Int64) {
        self.info = info
        self.fd = fd
        self.syncedSize = syncedSize
    }

    /// Creates a segment file holding only its header, durably: the file is
    /// written under a temporary name, synced, renamed, and the directory synced.
    static func create(directory: String, header: SegmentHeader) throws -> SegmentWriter {
        let name = SegmentName.fileName(sequence: header.sequence)
        let path = Directory.join(directory, name)
        let temporary = path + FormatConstants.temporarySuffix
        let bytes = header.encoded()
        let tmp = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try bytes.withUnsafeBytes { try tmp.write($0, at: 0) }
            try tmp.sync()
        } catch {
            tmp.close()
            throw error
        }
        tmp.close()
        try Directory.rename(temporary, to: path)
        try Directory.sync(directory)
        let fd = try FileDescriptor.open(path, O_RDWR)
        let size = Int64(bytes.count)
        return SegmentWriter(info: SegmentInfo(header: header, path: path, size: size), fd: fd, syncedSize: size)
    }

    /// Opens an existing segment to append after its last record.
    static func reopen(_ info: SegmentInfo) throws -> SegmentWriter {
        let fd = try FileDescriptor.open(info.path, O_RDWR)
        return SegmentWriter(info: info, fd: fd, syncedSize: info.size)
    }

    /// Offset in the file where the next record will start.
    var endOffset: Int64 { info.size + Int64(pending.count) }
    var endPosition: UInt64 { info.basePosition + UInt64(endOffset) }
    var hasRecords: Bool { endOffset > Int64(FormatConstants.segmentHeaderSize) }

    /// Writes `pending` to the file.
    func flush() throws {
        guard pending.count > 0 else { return }
        try fd.write(pending.bytes, at: info.size)
        info.size += Int64(pending.count)
        pending.removeAll()
    }

    /// Writes `pending` and makes the whole file durable.
    func sync() throws {
        try flush()
        if syncedSize != info.size {
            try fd.sync()
            syncedSize = info.size
        }
    }

    func close() { fd.close() }
}
