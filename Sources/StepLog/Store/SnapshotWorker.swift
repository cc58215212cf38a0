import Foundation

/// Builds index snapshots of sealed segments on a background queue, so the
/// writer never waits for them: a snapshot is an optimization, and one that
/// is missing (the process died first) is rebuilt after the next open.
final class SnapshotWorker: @unchecked Sendable {
    private let directory: String
    private let queue = DispatchQueue(label: "steplog.snapshots", qos: .utility)
    private let lock = NSLock()
    private var failures: [String] = []

    init(directory: String) { self.directory = directory }

    /// Builds the snapshot of `segment`, after which the index holds `keysAfter` samples.
    func enqueue(_ segment: SegmentInfo, keysAfter: Int) {
        queue.async { [directory] in
            do {
                try SegmentSnapshot.build(from: segment, keysAfter: keysAfter).write(directory: directory)
            } catch {
                self.lock.withLock { self.failures.append("\(segment.name): \(error)") }
            }
        }
    }

    /// Waits until every queued snapshot is written (or failed).
    func wait() { queue.sync {} }

    /// Snapshots that could not be built, with why.
    var problems: [String] { lock.withLock { failures } }
}
