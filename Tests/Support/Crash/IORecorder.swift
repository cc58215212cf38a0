import Foundation
import StepLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The crash harness's `FileOperationInterposer`: records every mutating
/// file operation in its store directory under one lock (so the recording's order is the order the
/// operations happened, across threads and across several opens of a
/// store), and fails the Nth one — once, or it and every later one — with
/// an errno, without performing it.
///
/// A failed sync is recorded as failed; the checker applies Linux's errseq
/// behaviour to it (the file's dirty pages are marked clean, not written).
/// The real file keeps the bytes in the page cache, as Linux does after a
/// failed fsync, so a later run reads them back exactly as it would there.
public final class IORecorder: FileOperationInterposer, @unchecked Sendable {
    /// Fail mutating operation number `at` (1-based) with `errno`; with
    /// `persistent`, every later one too.
    public struct Fault: Sendable, CustomStringConvertible {
        /// Which operation fails: the `at`-th, or the first one of a kind
        /// (the issue #19 cases), once.
        public enum Target: Sendable {
            case nth
            /// A sync of a segment by the preallocator (right after a write of
            /// zeros) while the segment holds data written since its last sync.
            case preallocationSync
            /// The writer's sync of a segment (right after a write of data).
            case writerSync
            /// The sync of the store directory right after a segment was renamed into place.
            case directorySyncAfterSegmentRename
            /// The sync of an index snapshot being written.
            case snapshotSync
        }
        public var at: Int
        public var errno: Int32
        public var persistent: Bool
        public var target: Target = .nth
        public init(at: Int, errno: Int32, persistent: Bool) {
            self.at = at
            self.errno = errno
            self.persistent = persistent
        }
        public init(first target: Target, errno: Int32 = EIO) {
            self.init(at: 1, errno: errno, persistent: false)
            self.target = target
        }
        public var description: String {
            let what = errno == ENOSPC ? "ENOSPC" : errno == EIO ? "EIO" : "errno \(errno)"
            switch target {
            case .nth: return "\(what) at op \(at)\(persistent ? " and after" : " once")"
            default: return "\(what) at the first \(target)"
            }
        }
    }

    /// The store directory: files in it at `init` are the recording's starting
    /// state (taken as durable).
    public let root: String
    public let initialFiles: [String: [UInt8]]
    /// The acknowledgement in force when recording began (from preparing the store).
    public let initialAcknowledgement: ExpectationLog.Mark?
    private let lock = NSLock()
    private var _events: [RecordedEvent] = []
    private var _count = 0
    private var _fault: Fault?
    private var _injected = 0
    /// Files with data (non-zero bytes) written since their last successful sync.
    private var dirtyData: Set<String> = []
    /// Per thread, the file its last write went to and whether that write was
    /// all zeros: a sync of that file from that thread is a preallocator's
    /// (it writes a fill of zeros, then syncs, on its own queue). A segment
    /// sync from any other thread — the writer's, or the store's sync thread
    /// (`syncInBackground`) — is the writer's.
    private var lastWrite: [UInt: (path: String, zeros: Bool)] = [:]

    public init(root: String, acknowledged: ExpectationLog.Mark?) {
        self.root = root
        var files: [String: [UInt8]] = [:]
        for name in (try? Directory.names(in: root)) ?? [] where Directory.kind(of: Directory.join(root, name)) == .file {
            files[name] = readFile(Directory.join(root, name))
        }
        initialFiles = files
        initialAcknowledgement = acknowledged
    }

    public var events: [RecordedEvent] { lock.withLock { _events } }
    /// Mutating operations seen so far.
    public var operationCount: Int { lock.withLock { _count } }
    /// Operations failed by the fault.
    public var injectedCount: Int { lock.withLock { _injected } }

    /// Sets (or, with nil, clears: "space was freed") the fault.
    public func setFault(_ fault: Fault?) {
        lock.withLock {
            _fault = fault
        }
    }

    public func acknowledge(_ mark: ExpectationLog.Mark) { lock.withLock { _events.append(.acknowledged(mark)) } }

    /// Routes the engine's operations on files under `root` through this
    /// recorder until `uninstall` (other tests' files are left alone).
    public func install() { IORecorderRouter.shared.add(self) }
    public func uninstall() { IORecorderRouter.shared.remove(self) }

    public func intercept(_ operation: FileOperation, perform: () -> Int32) -> Int32 {
        lock.lock()
        defer { lock.unlock() }
        _count += 1
        let recorded = RecordedOperation(operation)
        let code: Int32
        if let fault = _fault, matches(fault, recorded) {
            code = fault.errno
            _injected += 1
            if !fault.persistent && fault.target != .nth { _fault = nil }
        } else {
            code = perform()
        }
        switch recorded {
        case .write(let path, _, let bytes):
            let zeros = !bytes.contains { $0 != 0 }
            lastWrite[Self.thread] = (path, zeros)
            if code == 0 && !zeros { dirtyData.insert(path) }
        case .sync(let path):
            lastWrite[Self.thread] = nil
            if code == 0 { dirtyData.remove(path) }
        default: break
        }
        _events.append(.operation(recorded, result: code))
        return code
    }

    /// The calling thread, as a key. (A dispatch worker thread serves many
    /// queues: a sync forgets the thread's last write, see `intercept`.)
    private static var thread: UInt {
        #if canImport(Glibc)
        return UInt(pthread_self())
        #else
        return UInt(bitPattern: Int(bitPattern: pthread_self()))
        #endif
    }

    /// True when this thread's last write was zeros to `path`: the sync is a
    /// preallocator's fill's (under `lock`).
    private func isFillSync(_ path: String) -> Bool {
        guard let last = lastWrite[Self.thread] else { return false }
        return last.path == path && last.zeros
    }

    private func matches(_ fault: Fault, _ operation: RecordedOperation) -> Bool {
        let previous: RecordedOperation? = {
            if case .operation(let op, _)? = _events.last { return op }
            return nil
        }()
        switch fault.target {
        case .nth:
            return _count == fault.at || (fault.persistent && _count > fault.at)
        case .preallocationSync:
            guard case .sync(let path) = operation, path.hasSuffix(".log"), dirtyData.contains(path) else { return false }
            return isFillSync(path)
        case .writerSync:
            // The writer syncs on its own thread (`sync()`) or on the store's
            // sync thread (`syncInBackground`): any segment sync but a fill's.
            guard case .sync(let path) = operation, path.hasSuffix(".log"), dirtyData.contains(path) else { return false }
            return !isFillSync(path)
        case .snapshotSync:
            guard case .sync(let path) = operation else { return false }
            return path.hasSuffix(".hint.tmp")
        case .directorySyncAfterSegmentRename:
            guard case .syncDirectory = operation, case .rename(_, let to)? = previous else { return false }
            return to.hasSuffix(".log")
        }
    }
}
