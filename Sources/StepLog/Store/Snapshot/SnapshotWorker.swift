import Foundation

/// Builds index snapshots of sealed segments on a background queue, so the
/// writer never waits for them: a snapshot is an optimization, and one that
/// is missing (the process died first) is rebuilt after the next open.
final class SnapshotWorker: @unchecked Sendable {
    private let directory: String
    private let queue = DispatchQueue(label: "steplog.snapshots", qos: .utility)
    private let lock = NSLock()
    private var failures: [String] = []
    private var firstSyncFailure: Error?

    init(directory: String) { self.directory = directory }

    /// Builds the snapshot of `segment`, after which the index holds `keysAfter` samples.
    func enqueue(_ segment: SegmentInfo, keysAfter: Int) {
        queue.async { [directory] in
            do {
                try SegmentSnapshot.build(from: segment, keysAfter: keysAfter).write(directory: directory)
            } catch {
                self.lock.withLock {
                    self.failures.append("\(segment.name): \(error)")
                    if case .io(let operation, _, _)? = error as? StepLogError, operation.hasPrefix("sync"), self.firstSyncFailure == nil {
                        self.firstSyncFailure = error
                    }
                }
            }
        }
    }

    /// Waits until every queued snapshot is written (or failed).
    func wait() { queue.sync {} }

    /// The first failed sync of a snapshot (or of its directory), if any: the
    /// store fails its writer with it (a failed sync means the device lost
    /// writes; nothing more is acknowledged until the store is reopened).
    var syncFailure: Error? { lock.withLock { firstSyncFailure } }

    /// Snapshots that could not be built, with why.
    var problems: [String] { lock.withLock { failures } }
}
