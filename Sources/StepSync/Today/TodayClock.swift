import Foundation

/// Where "now" comes from, injectable so tests can move time by hand.
public protocol TodayClock: Sendable {
    func now() -> Date
}

/// The system's clock.
public struct SystemClock: TodayClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock that moves only when told (tests).
public final class VirtualClock: TodayClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    public init(_ start: Date) { current = start }

    public func now() -> Date { lock.withLock { current } }

    public func advance(by seconds: Double) { lock.withLock { current = current.addingTimeInterval(seconds) } }

    public func set(_ date: Date) { lock.withLock { current = date } }
}
