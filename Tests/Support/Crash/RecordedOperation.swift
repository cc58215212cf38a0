import StepLog

/// One mutating file operation as an `IORecorder` kept it: the bytes of a
/// write are copied, paths are absolute.
public enum RecordedOperation: Sendable, CustomStringConvertible {
    case open(path: String, flags: Int32)
    case write(path: String, offset: Int64, bytes: [UInt8])
    case truncate(path: String, size: Int64)
    case sync(path: String)
    case syncDirectory(path: String)
    case rename(from: String, to: String)
    case remove(path: String)
    case createDirectory(path: String)

    init(_ operation: FileOperation) {
        switch operation {
        case .openForWriting(let path, let flags): self = .open(path: path, flags: flags)
        case .write(let path, _, let offset, let bytes): self = .write(path: path, offset: offset, bytes: Array(bytes))
        case .truncate(let path, _, let size): self = .truncate(path: path, size: size)
        case .sync(let path, _): self = .sync(path: path)
        case .syncDirectory(let path): self = .syncDirectory(path: path)
        case .rename(let from, let to): self = .rename(from: from, to: to)
        case .remove(let path): self = .remove(path: path)
        case .createDirectory(let path): self = .createDirectory(path: path)
        }
    }

    public var description: String {
        func base(_ p: String) -> String { String(p.split(separator: "/").last ?? "") }
        switch self {
        case .open(let p, _): return "open \(base(p))"
        case .write(let p, let o, let b): return "write \(base(p)) [\(o), \(o + Int64(b.count)))"
        case .truncate(let p, let s): return "truncate \(base(p)) to \(s)"
        case .sync(let p): return "sync \(base(p))"
        case .syncDirectory(let p): return "sync directory \(base(p))"
        case .rename(let f, let t): return "rename \(base(f)) to \(base(t))"
        case .remove(let p): return "remove \(base(p))"
        case .createDirectory(let p): return "mkdir \(base(p))"
        }
    }
}

/// What a recording holds, in the order it happened: operations (with the
/// errno they returned, 0 for success, injected or real) and the workload's
/// acknowledgements (a write call that returned success).
public enum RecordedEvent: Sendable {
    case operation(RecordedOperation, result: Int32)
    case acknowledged(ExpectationLog.Mark)
}
