#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every error the engine throws. Each case carries where it happened; the
/// one-line rendering for people is `description`, written in one place.
public enum StepLogError: Error, Equatable, CustomStringConvertible {
    /// A system call failed.
    case io(operation: String, path: String, errno: Int32)
    /// Another process holds the store's lock.
    case locked(path: String, pid: Int32?)
    /// The path exists but is not a StepLog store, or no store exists there.
    case notAStore(path: String, reason: String)
    /// Damage that is not a torn tail: bad checksum, impossible length, bad
    /// header, malformed payload, missing segment.
    case corruption(path: String, offset: Int64, reason: String)
    /// A sample that cannot be stored (nil id, end before start, …).
    case invalidSample(id: String, reason: String)
    /// A write was attempted on a store opened read-only.
    case readOnly(path: String)
    /// The store was closed.
    case closed(path: String)
    /// A record to be written does not fit the format's limits.
    case recordTooLarge(bytes: Int)
    /// A source anchor longer than the format allows.
    case anchorTooLarge(family: String, bytes: Int)
    /// A compaction in the background stopped without committing (its
    /// outputs are discarded; the store is unchanged).
    case compactionAbandoned(path: String, reason: String)
    /// The next segment would be numbered past `FormatConstants.maxSequence`
    /// (only a store whose numbers were set by hand gets there).
    case sequencesExhausted(path: String)

    public var description: String {
        switch self {
        case .io(let operation, let path, let code):
            // A full disk is the one I/O error a user can fix: say so first.
            let prefix = code == ENOSPC ? "disk full: " : ""
            return "\(prefix)\(operation) \(path): \(String(cString: strerror(code))) (errno \(code))"
        case .locked(let path, let pid):
            if let pid { return "store is locked by pid \(pid) (\(path))" }
            return "store is locked by another process (\(path))"
        case .notAStore(let path, let reason):
            return "\(path) is not a StepLog store: \(reason)"
        case .corruption(let path, let offset, let reason):
            return "corruption in \(path) at offset \(offset): \(reason)"
        case .invalidSample(let id, let reason):
            return "invalid sample \(id): \(reason)"
        case .readOnly(let path):
            return "store \(path) is open read-only"
        case .closed(let path):
            return "store \(path) is closed"
        case .recordTooLarge(let bytes):
            return "record of \(bytes) bytes exceeds the format's limit of \(FormatConstants.maxRecordPayload) bytes"
        case .anchorTooLarge(let family, let bytes):
            return "source anchor of \(bytes) bytes for '\(family)' exceeds the format's limit of \(FormatConstants.maxAnchorBytes) bytes"
        case .compactionAbandoned(let path, let reason):
            return "compaction of \(path) abandoned: \(reason)"
        case .sequencesExhausted(let path):
            return "cannot create \(path): segment sequence numbers end at \(FormatConstants.maxSequence)"
        }
    }
}
