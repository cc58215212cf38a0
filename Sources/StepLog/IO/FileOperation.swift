/// One file-system operation that changes what is (or will be) on disk, as
/// the I/O seam (`FileOperationInterposer`) sees it. Paths are as the engine
/// named them; a descriptor's operations carry the path it was opened with.
/// Borrowed buffers are valid only during the interposer's call.
public enum FileOperation {
    /// open(2) with O_WRONLY, O_RDWR, O_CREAT or O_TRUNC.
    case openForWriting(path: String, flags: Int32)
    /// pwrite(2) of `bytes` at `offset`.
    case write(path: String, descriptor: Int32, offset: Int64, bytes: UnsafeRawBufferPointer)
    /// ftruncate(2).
    case truncate(path: String, descriptor: Int32, size: Int64)
    /// fdatasync(2) / F_FULLFSYNC of a file.
    case sync(path: String, descriptor: Int32)
    /// fsync(2) of a directory.
    case syncDirectory(path: String)
    /// rename(2).
    case rename(from: String, to: String)
    /// unlink(2).
    case remove(path: String)
    /// mkdir(2).
    case createDirectory(path: String)
}
