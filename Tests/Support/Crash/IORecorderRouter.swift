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
        let path = operation.path
        let owner = lock.withLock {
            recorders.first { recorder in
                if Self.path(path, isIn: recorder.root) { return true }
                // Creating the store directory syncs its parent: that makes the store's name durable.
                if case .syncDirectory = operation { return path == Directory.parentPath(of: recorder.root) }
                return false
            }
        }
        guard let owner else { return perform() }
        return owner.intercept(operation, perform: perform)
    }

    static func path(_ path: String, isIn root: String) -> Bool {
        path == root || path.hasPrefix(root.hasSuffix("/") ? root : root + "/")
    }
}

extension FileOperation {
    /// The path the operation acts on (a rename's source).
    var path: String {
        switch self {
        case .openForWriting(let path, _), .write(let path, _, _, _), .truncate(let path, _, _), .sync(let path, _),
             .syncDirectory(let path), .remove(let path), .createDirectory(let path):
            return path
        case .rename(let from, _):
            return from
        }
    }
}
