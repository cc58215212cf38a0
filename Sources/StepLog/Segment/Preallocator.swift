import Foundation

/// Keeps zero-filled, synced space ahead of a segment writer on a background
/// queue. The writer never writes into a range being filled: it waits for the
/// fill when it catches up with it.
final class Preallocator: @unchecked Sendable {
    private let fd: FileDescriptor
    private let ahead: Int64
    private let limit: Int64
    private let queue = DispatchQueue(label: "steplog.preallocate", qos: .utility)
    private let lock = NSLock()
    private var _preparedEnd: Int64
    private var fillingFrom: Int64?
    private var stopped = false
    /// A fill's sync running now, and the first one that failed (sticky).
    private var syncing = false
    private var syncFailure: Error?
    private static let zeros = [UInt8](repeating: 0, count: 1 << 20)

    init(fd: FileDescriptor, preparedEnd: Int64, ahead: Int64, limit: Int64) {
        self.fd = fd
        _preparedEnd = preparedEnd
        self.ahead = ahead
        self.limit = limit
    }

    /// End of the zero-filled, synced space (the file's size once no fill runs).
    var preparedEnd: Int64 { lock.lock(); defer { lock.unlock() }; return _preparedEnd }

    /// Starts a fill when less than half of `ahead` is left before the writer.
    func extendIfNeeded(writeOffset: Int64) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, fillingFrom == nil, _preparedEnd < limit, _preparedEnd - writeOffset < ahead / 2 else { return }
        let start = max(_preparedEnd, writeOffset)
        let end = min(limit, start + ahead)
        guard end > start else { return }
        fillingFrom = start
        queue.async { self.fill(from: start, to: end) }
    }

    private func fill(from start: Int64, to end: Int64) {
        var ok = true
        var at = start
        Self.zeros.withUnsafeBytes { zeros in
            while ok && at < end {
                let n = Int(min(Int64(zeros.count), end - at))
                ok = (try? fd.write(UnsafeRawBufferPointer(rebasing: zeros[0..<n]), at: at)) != nil
                at += Int64(n)
            }
        }
        var failedSync: Error?
        if ok {
            lock.lock()
            syncing = true
            lock.unlock()
            do { try fd.sync() } catch { failedSync = error; ok = false }
        }
        lock.lock()
        // A failed write of zeros (a full disk, say) only stops preallocating:
        // the writer's own appends extend the file and report their own
        // errors. A failed sync is the writer's failure too (it syncs the
        // writer's file): kept, and thrown by the writer's next sync.
        if ok { _preparedEnd = end } else { stopped = true; _preparedEnd = max(_preparedEnd, at) }
        if let failedSync, syncFailure == nil { syncFailure = failedSync }
        syncing = false
        fillingFrom = nil
        lock.unlock()
    }

    /// Waits for a running fill when the writer is about to write at or past
    /// where that fill started.
    func waitIfFilling(before writeEnd: Int64) {
        lock.lock()
        let busy = fillingFrom.map { writeEnd > $0 } ?? false
        lock.unlock()
        if busy { queue.sync {} }
    }

    /// Throws the failure of any fill's sync so far. A fill whose sync is
    /// running now is waited for first: the kernel reports a write-back
    /// error to one of two concurrent syncs of a file only.
    func throwIfSyncFailed() throws {
        lock.lock()
        let wait = syncing
        lock.unlock()
        if wait { queue.sync {} }
        lock.lock()
        defer { lock.unlock() }
        if let syncFailure { throw syncFailure }
    }

    /// Waits for a running fill and starts no more.
    func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
        queue.sync {}
    }
}
