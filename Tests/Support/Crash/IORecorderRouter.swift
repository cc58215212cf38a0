import Foundation
import StepLog

/// The one interposer installed while any `IORecorder` is: it hands each file
/// operation to the recorder whose store directory holds it, and lets every
/// other operation through untouched. Tests run concurrently in one process
/// (Swift Testing's default), so a recorder must see — and fail — only its own
/// store's operations, never those of a test beside it.
final class IORecorderRouter: FileOperationInterposer, @unchecked Sendable {
    static let shared = IORecorderRouter()

    private let lock = NSLock()
    private var recorders: [IORecorder] = []

    func add(_ recorder: IORecorder) {
        lock.withLock {
            recorders.append(recorder)
            FileOperations.interposer = self
        }
    }

    func remove(_ recorder: IORecorder) {
        lock.withLock {
            recorders.removeAll { $0 === recorder }
            if recorders.isEmpty { FileOperations.interposer = nil }
        }
    }

    func intercept(_ operation: FileOperation, perform: () -> Int32) -> Int32 {
        let owner = lock.withLock { recorders.first { Self.operation(operation, concerns: $0.root) } }
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
