import Foundation
import StepLog

/// The one interposer installed while any `IORecorder` is: it hands each file
/// operation to the recorder whose store directory holds it, and lets every
/// other operation through untouched. Tests run concurrently in one process
/// (Swift Testing's default), so a recorder must see — and fail — only its own
/// store's operations, never those of a test beside it. Other interposers
/// of one store directory (a test's own) are routed the same way.
public final class IORecorderRouter: FileOperationInterposer, @unchecked Sendable {
    public static let shared = IORecorderRouter()

    private let lock = NSLock()
    private var routes: [(root: String, interposer: any FileOperationInterposer)] = []

    func add(_ recorder: IORecorder) { add(recorder, root: recorder.root) }

    func remove(_ recorder: IORecorder) { remove(recorder as any FileOperationInterposer) }

    /// Hands `interposer` every operation inside `root` (or on `root` itself) until `remove`.
    public func add(_ interposer: any FileOperationInterposer, root: String) {
        lock.withLock {
            routes.append((root, interposer))
            FileOperations.interposer = self
        }
    }

    public func remove(_ interposer: any FileOperationInterposer) {
        lock.withLock {
            routes.removeAll { $0.interposer === interposer }
            if routes.isEmpty { FileOperations.interposer = nil }
        }
    }

    public func intercept(_ operation: FileOperation, perform: () -> Int32) -> Int32 {
        let owner = lock.withLock { routes.first { Self.operation(operation, concerns: $0.root) }?.interposer }
        guard let owner else { return perform() }
        return owner.intercept(operation, perform: perform)
    }

    /// True when `operation` acts inside `root` or on `root` itself (its sync).
    static func operation(_ operation: FileOperation, concerns root: String) -> Bool {
        let prefix = root.hasSuffix("/") ? root : root + "/"
        func inside(_ path: String) -> Bool { path == root || path.hasPrefix(prefix) }
        switch operation {
        case .openForWriting(let path, _), .write(let path, _, _, _), .truncate(let path, _, _), .sync(let path, _),
             .syncDirectory(let path), .remove(let path), .createDirectory(let path):
            return inside(path)
        case .rename(let from, let to):
            return inside(from) || inside(to)
        }
    }
}
