#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Directory operations the engine needs, each followed where it matters by a
/// directory fsync (creating, renaming or deleting a file is not durable until
/// the directory is synced: the ALICE study's most common finding).
public enum Directory {
    /// The names in `path` (no "." or ".."), unsorted.
    public static func names(in path: String) throws -> [String] {
        guard let dir = opendir(path) else { throw StepLogError.io(operation: "list directory", path: path, errno: errno) }
        defer { closedir(dir) }
        var result: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { result.append(name) }
        }
        return result
    }

    /// Kind of the file system object at `path`, or nil when nothing is there.
    public enum Kind { case directory, file, other }

    public static func kind(of path: String) -> Kind? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        switch st.st_mode & S_IFMT {
        case S_IFDIR: return .directory
        case S_IFREG: return .file
        default: return .other
        }
    }

    /// mkdir(2) of `path` and any missing parents, syncing each parent.
    public static func create(_ path: String) throws {
        if kind(of: path) == .directory { return }
        let parent = parentPath(of: path)
        if parent != path, kind(of: parent) == nil { try create(parent) }
        let perform = { mkdir(path, 0o755) != 0 && errno != EEXIST ? errno : 0 }
        let code = FileOperations.interposer.map { $0.intercept(.createDirectory(path: path), perform: perform) } ?? perform()
        if code != 0 { throw StepLogError.io(operation: "create directory", path: path, errno: code) }
        try sync(parent)
    }

    /// fsync(2) of the directory itself, so entries created, renamed or removed
    /// in it are durable.
    public static func sync(_ path: String) throws {
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        let code = FileOperations.interposer.map { $0.intercept(.syncDirectory(path: path)) { fd.syncDirectoryEntries() } }
            ?? fd.syncDirectoryEntries()
        if code != 0 { throw StepLogError.io(operation: "sync directory", path: path, errno: code) }
    }

    /// rename(2), atomic within one file system.
    public static func rename(_ from: String, to: String) throws {
        let perform = { Glibc_or_Darwin_rename(from, to) != 0 ? errno : 0 }
        let code = FileOperations.interposer.map { $0.intercept(.rename(from: from, to: to), perform: perform) } ?? perform()
        if code != 0 { throw StepLogError.io(operation: "rename to \(to)", path: from, errno: code) }
    }

    /// unlink(2); a missing file is not an error.
    public static func remove(_ path: String) throws {
        let perform = { unlink(path) != 0 && errno != ENOENT ? errno : 0 }
        let code = FileOperations.interposer.map { $0.intercept(.remove(path: path), perform: perform) } ?? perform()
        if code != 0 { throw StepLogError.io(operation: "remove", path: path, errno: code) }
    }

    public static func parentPath(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    public static func join(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }
}

#if canImport(Glibc)
@inline(__always) private func Glibc_or_Darwin_rename(_ a: String, _ b: String) -> Int32 { Glibc.rename(a, b) }
#else
@inline(__always) private func Glibc_or_Darwin_rename(_ a: String, _ b: String) -> Int32 { Darwin.rename(a, b) }
#endif
