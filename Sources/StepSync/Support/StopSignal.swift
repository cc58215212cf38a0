import Foundation

/// A request to stop at the next safe point (the seeds' Pause): set from a
/// signal handler or a test, read by the pipeline stages between batches.
public final class StopSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var requested = false

    public init() {}

    public var isRequested: Bool {
        lock.lock()
        defer { lock.unlock() }
        return requested
    }

    public func request() {
        lock.lock()
        requested = true
        lock.unlock()
    }
}

/// Thrown by a stage that stopped at a safe point because a stop was requested.
public struct StoppedByRequest: Error, CustomStringConvertible {
    public var stage: String
    public init(stage: String) { self.stage = stage }
    public var description: String { "\(stage) paused at a safe point" }
}
