#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A thin, typed wrapper over a POSIX file descriptor (swift-system's idea).
/// Each method maps to one system call, named in its comment; `EINTR` is
/// retried and partial reads/writes loop until done. Errors carry the path.
public struct FileDescriptor: Sendable {
    public let rawValue: Int32
    public let path: String

    public init(rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    /// open(2).
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws -> FileDescriptor {
        if flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC) != 0, let interposer = FileOperations.interposer {
            var fd: Int32 = -1
            let code = interposer.intercept(.openForWriting(path: path, flags: flags)) {
                fd = retryingEINTR { Glibc_or_Darwin_open(path, flags | O_CLOEXEC, mode) }
                return fd >= 0 ? 0 : errno
            }
            guard code == 0, fd >= 0 else { throw StepLogError.io(operation: "open", path: path, errno: code == 0 ? EIO : code) }
            return FileDescriptor(rawValue: fd, path: path)
        }
        let fd = retryingEINTR { Glibc_or_Darwin_open(path, flags | O_CLOEXEC, mode) }
        guard fd >= 0 else { throw StepLogError.io(operation: "open", path: path, errno: errno) }
        return FileDescriptor(rawValue: fd, path: path)
    }

    /// close(2). Errors are ignored: the descriptor is gone either way, and
    /// durability was decided by the last successful `sync`.
    public func close() { _ = Glibc_or_Darwin_close(rawValue) }

    /// pread(2) until `count` bytes are read or end of file; returns bytes read.
    public func read(into buffer: UnsafeMutableRawPointer, count: Int, at offset: Int64) throws -> Int {
        var done = 0
        while done < count {
            let n = retryingEINTR { pread(rawValue, buffer + done, count - done, off_t(offset) + off_t(done)) }
            if n < 0 { throw StepLogError.io(operation: "read", path: path, errno: errno) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// pwrite(2) of every byte, looping over partial writes.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        let code: Int32
        if let interposer = FileOperations.interposer {
            code = interposer.intercept(.write(path: path, descriptor: rawValue, offset: offset, bytes: bytes)) {
                writeAll(bytes, at: offset)
            }
        } else {
            code = writeAll(bytes, at: offset)
        }
        if code != 0 { throw StepLogError.io(operation: "write", path: path, errno: code) }
    }

    /// The pwrite(2) loop; 0 or the errno.
    private func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Int32 {
        var done = 0
        while done < bytes.count {
            let n = retryingEINTR { pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if n < 0 { return errno }
            if n == 0 { return EIO }
            done += n
        }
        return 0
    }

    /// Makes written data durable: fdatasync(2) on Linux; fcntl(F_FULLFSYNC) on
    /// Apple platforms, where plain fsync does not survive power loss (falls back
    /// to fsync(2) on file systems without F_FULLFSYNC).
    public func sync() throws {
        let code: Int32
        if let interposer = FileOperations.interposer {
            code = interposer.intercept(.sync(path: path, descriptor: rawValue)) { syncData() }
        } else {
            code = syncData()
        }
        if code != 0 { throw StepLogError.io(operation: "sync", path: path, errno: code) }
    }

    /// The sync system call; 0 or the errno.
    private func syncData() -> Int32 {
        #if canImport(Darwin)
        if fcntl(rawValue, F_FULLFSYNC) == 0 { return 0 }
        let result = retryingEINTR { fsync(rawValue) }
        #else
        let result = retryingEINTR { fdatasync(rawValue) }
        #endif
        return result == 0 ? 0 : errno
    }

    /// fsync(2) of a directory's descriptor (its entries' creation, renaming
    /// and removal become durable); F_FULLFSYNC where the system has it.
    func syncDirectoryEntries() -> Int32 {
        #if canImport(Darwin)
        if fcntl(rawValue, F_FULLFSYNC) == 0 { return 0 }
        #endif
        return retryingEINTR({ fsync(rawValue) }) == 0 ? 0 : errno
    }

    /// ftruncate(2).
    public func truncate(to size: Int64) throws {
        let perform = { retryingEINTR { ftruncate(rawValue, off_t(size)) } == 0 ? 0 : errno }
        let code = FileOperations.interposer.map { $0.intercept(.truncate(path: path, descriptor: rawValue, size: size), perform: perform) } ?? perform()
        if code != 0 { throw StepLogError.io(operation: "truncate", path: path, errno: code) }
    }

    /// fstat(2): the file size in bytes.
    public func size() throws -> Int64 {
        var st = stat()
        guard fstat(rawValue, &st) == 0 else { throw StepLogError.io(operation: "stat", path: path, errno: errno) }
        return Int64(st.st_size)
    }

    /// posix_fadvise(2) sequential-read hint where the system has it (no effect on results).
    public func adviseSequential() {
        #if canImport(Glibc)
        _ = posix_fadvise(rawValue, 0, 0, Int32(POSIX_FADV_SEQUENTIAL))
        #endif
    }
}

@inline(__always)
func retryingEINTR<T: BinaryInteger>(_ body: () -> T) -> T {
    while true {
        let result = body()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}

// The C functions, spelled once so the methods above can share their names.
#if canImport(Glibc)
@inline(__always) private func Glibc_or_Darwin_open(_ p: String, _ f: Int32, _ m: mode_t) -> Int32 { Glibc.open(p, f, m) }
@inline(__always) private func Glibc_or_Darwin_close(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#else
@inline(__always) private func Glibc_or_Darwin_open(_ p: String, _ f: Int32, _ m: mode_t) -> Int32 { Darwin.open(p, f, m) }
@inline(__always) private func Glibc_or_Darwin_close(_ fd: Int32) -> Int32 { Darwin.close(fd) }
#endif
