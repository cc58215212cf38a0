import Foundation

/// Syncs the newest segment on a thread of its own, so that a writer encodes
/// and writes batch k+1 while the disk makes batch k durable
/// (`StepLogStore.syncInBackground`).
///
/// The store asks (`request`) and harvests (`takeCompleted`) under its mutex;
/// this thread never takes that mutex, so the store may wait for it (`drain`)
/// while holding it. Requests coalesce: a sync started later covers every
/// record written before it started, so a request made while one runs waits
/// for the next.
///
/// Failure is sticky, as for the writer's own syncs: once a sync fails, every
/// position it did not make durable is refused (`wait` throws), no later
/// request is accepted, and the store takes the error as its failure at its
/// next write. A later sync that succeeds could not vouch for the bytes the
/// failed one dropped (after a failed fsync Linux marks them clean unwritten).
final class BackgroundSyncer: @unchecked Sendable {
    /// One sync of one segment file: its bytes up to `size` (written before
    /// the request), which end at log position `position`.
    struct Request {
        var fd: FileDescriptor
        var preallocator: Preallocator?
        var writer: ObjectIdentifier
        var size: Int64
        var position: UInt64
    }

    private let condition = NSCondition()
    private let queue = DispatchQueue(label: "steplog.sync", qos: .userInitiated)
    // Guarded by `condition`:
    private var next: Request?
    private var running = false
    private var durable: UInt64 = 0
    /// The highest position a sync running or waiting to run covers.
    private var requested: UInt64 = 0
    private var completed: (writer: ObjectIdentifier, size: Int64)?
    private var failureSeen: Error?

    /// The first sync failure, if any.
    var failure: Error? {
        condition.lock()
        defer { condition.unlock() }
        return failureSeen
    }

    /// Starts a sync of `request.fd` up to `request.size` (or leaves it for
    /// the sync after the one running). Throws the failure of an earlier sync.
    func request(_ request: Request) throws {
        condition.lock()
        defer { condition.unlock() }
        if let failureSeen { throw failureSeen }
        guard request.position > max(durable, requested) else { return }
        requested = request.position
        next = request
        if !running {
            running = true
            queue.async { self.run() }
        }
    }

    private func run() {
        condition.lock()
        while let request = next {
            next = nil
            condition.unlock()
            var failed: Error?
            do {
                try SegmentWriter.syncFile(request.fd, request.preallocator)
            } catch {
                failed = error
            }
            condition.lock()
            if let failed {
                if failureSeen == nil { failureSeen = failed }
                next = nil
            } else {
                durable = max(durable, request.position)
                if completed?.writer != request.writer || completed!.size < request.size {
                    completed = (request.writer, request.size)
                }
            }
            condition.broadcast()
        }
        running = false
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until `position` is durable; throws the sync failure that
    /// came first instead.
    func wait(for position: UInt64) throws {
        condition.lock()
        defer { condition.unlock() }
        while durable < position {
            if let failureSeen { throw failureSeen }
            condition.wait()
        }
    }

    /// True when `position` is durable (without waiting).
    func isDurable(_ position: UInt64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return durable >= position
    }

    /// Waits until no sync runs or waits to run (the store then syncs the
    /// file itself, closes it, or seals it: never beside a sync of ours).
    func drain() {
        condition.lock()
        defer { condition.unlock() }
        while running { condition.wait() }
    }

    /// The largest size of `writer`'s file a background sync made durable
    /// since the last call, or nil.
    func takeCompleted(for writer: SegmentWriter) -> Int64? {
        condition.lock()
        defer { condition.unlock() }
        guard let c = completed else { return nil }
        completed = nil
        return c.writer == ObjectIdentifier(writer) ? c.size : nil
    }

    /// Records that the store's own sync made `position` durable.
    func noteDurable(_ position: UInt64) {
        condition.lock()
        defer { condition.unlock() }
        if position > durable {
            durable = position
            condition.broadcast()
        }
    }
}
