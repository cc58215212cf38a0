import Foundation
import StepLog

/// The requests of an upload stage that are out at once: batches read from the
/// store in log order (each after the last one read), each posted on its own
/// task, at most `limit` out, handed back oldest first so that the caller
/// acknowledges them in the order sent (`APISyncService`). Reading stops when
/// the store has no more or a stop is requested.
final class BatchesInFlight<Item, Response: Sendable> {
    typealias Request = Task<(Response, Int), Error>

    private let limit: Int
    private let read: (_ after: LogPosition?) throws -> [Item]
    private let position: (Item) -> LogPosition
    private let post: ([Item]) -> Request
    private let stopped: () -> Bool
    private var outstanding: [(batch: [Item], request: Request)] = []
    private var lastRead: LogPosition?
    private var exhausted = false

    init(limit: Int, read: @escaping (_ after: LogPosition?) throws -> [Item], position: @escaping (Item) -> LogPosition,
         post: @escaping ([Item]) -> Request, stopped: @escaping () -> Bool) {
        self.limit = limit
        self.read = read
        self.position = position
        self.post = post
        self.stopped = stopped
    }

    /// Reads and posts batches until `limit` are out, the store has no more,
    /// or a stop is requested.
    func fill() throws {
        while outstanding.count < limit, !exhausted, !stopped() {
            let next = try read(lastRead)
            guard let last = next.last else {
                exhausted = true
                break
            }
            lastRead = position(last)
            outstanding.append((next, post(next)))
        }
    }

    /// The oldest batch out and its request, or nil when none is.
    func next() -> (batch: [Item], request: Request)? {
        outstanding.isEmpty ? nil : outstanding.removeFirst()
    }

    var isEmpty: Bool { outstanding.isEmpty }

    /// Cancels what is out (a failure: those batches are sent again by the next run).
    func cancelAll() {
        for (_, request) in outstanding { request.cancel() }
    }
}
