#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The store's single-writer lock: flock(2) on `LOCK` in the store directory,
/// which holds "pid N" of the owner (Bitcask and bbolt do the same). The lock
/// dies with its process, so a crashed writer never leaves the store locked.
public final class FileLock {
    public let path: String
    private let fd: FileDescriptor

    /// Takes the lock: exclusive for a writer, shared for read-only openers
    /// (several readers, no writer). Throws `.locked` with the owner's pid.
    public init(path: String, exclusive: Bool) throws {
        self.path = path
        // The descriptor becomes self.fd only once it holds the lock: an init
        // that throws after every stored property is set still runs deinit,
        // which would close it a second time — and in a threaded process that
        // second close takes whatever file another thread opened meanwhile.
        let fd = try FileDescriptor.open(path, O_RDWR | O_CREAT)
        if flock(fd.rawValue, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            let code = errno
            let owner = FileLock.readOwner(fd)
            fd.close()
            if code == EWOULDBLOCK || code == EAGAIN { throw StepLogError.locked(path: path, pid: owner) }
            throw StepLogError.io(operation: "lock", path: path, errno: code)
        }
        self.fd = fd
        if exclusive {
            let text = Array("pid \(getpid())\n".utf8)
            try fd.truncate(to: 0)
            try text.withUnsafeBytes { try fd.write($0, at: 0) }
        }
    }

    deinit {
        _ = flock(fd.rawValue, LOCK_UN)
        fd.close()
    }

    private static func readOwner(_ fd: FileDescriptor) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = (try? buffer.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: 64, at: 0) }) ?? 0
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        guard text.hasPrefix("pid ") else { return nil }
        return Int32(text.dropFirst(4).prefix { $0.isNumber })
    }
}
