/// The one check read-only tools (verify, dump) run before reading a store
/// directory, so that each says the same true thing about a wrong path: a
/// missing path is "no such directory", a regular file is "a file, not a
/// directory" (the opener says the same when it will not create one).
public enum StoreDirectoryCheck {
    public static func requireExisting(_ path: String) throws {
        switch Directory.kind(of: path) {
        case nil: throw StepLogError.notAStore(path: path, reason: "no such directory")
        case .directory: return
        case .file: throw StepLogError.notAStore(path: path, reason: "it is a file, not a directory")
        case .other: throw StepLogError.notAStore(path: path, reason: "it is not a directory")
        }
    }

    /// A directory without segments that holds other files (a photo folder, a
    /// home directory) is not a store: refused, not taken for an empty one.
    /// `strangers` are the names that are no StepLog file (LOCK, segments,
    /// snapshots and temporary files are).
    public static func refuseStrangers(_ strangers: [String], segments: Int, in path: String) throws {
        guard segments == 0, let first = strangers.min() else { return }
        throw StepLogError.notAStore(path: path, reason: "it holds files that are not StepLog files (\(first)) and no segments")
    }
}
