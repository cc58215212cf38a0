#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The export file, opened read-only, read with positioned reads so that the
/// zip directory lookup and the streaming thread never share a file offset.
/// Immutable after `init` (pread is safe from any thread); closed on deinit.
final class ExportInputFile: Sendable {
    let path: String
    let size: Int64
    private let descriptor: Int32

    /// open(2) + fstat(2).
    init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ExportError.unreadable(path: path, operation: "open", errno: errno) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw ExportError.unreadable(path: path, operation: "stat", errno: code)
        }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw ExportError.unreadable(path: path, operation: "read a directory", errno: EISDIR)
        }
        descriptor = fd
        size = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    /// pread(2) until `count` bytes or the end of the file; returns the bytes
    /// read (fewer than `count` only at the end). Retries EINTR.
    func read(at offset: Int64, into buffer: UnsafeMutableRawPointer, count: Int) throws -> Int {
        var done = 0
        while done < count {
            let n = pread(descriptor, buffer + done, count - done, off_t(offset + Int64(done)))
            if n > 0 {
                done += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw ExportError.unreadable(path: path, operation: "read at byte offset \(offset + Int64(done))", errno: errno)
            }
        }
        return done
    }

    /// Up to `count` bytes at `offset` as an array (shorter at the end of the file).
    func readBytes(at offset: Int64, count: Int) throws -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let n = try bytes.withUnsafeMutableBytes { try read(at: offset, into: $0.baseAddress!, count: count) }
        bytes.removeLast(count - n)
        return bytes
    }
}
