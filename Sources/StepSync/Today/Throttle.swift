import Foundation

/// Calls `action` at most once per `interval` with the latest value: the
/// first value after a quiet interval goes out at once; later ones wait, and
/// the newest of them goes out when the interval has passed (the trailing
/// call), so the last value is never lost. Time is whatever `now` says:
/// `tick` delivers calls that are due.
public final class Throttle {
    public let interval: Double
    private let action: (Int) -> Void
    private var lastFire: Date?
    private var pending: Int?

    public init(interval: Double, action: @escaping (Int) -> Void) {
        self.interval = interval
        self.action = action
    }

    /// Offers a new value at `now`.
    public func submit(_ value: Int, now: Date) {
        if let last = lastFire, now.timeIntervalSince(last) < interval {
            pending = value
        } else {
            fire(value, at: now)
        }
    }

    /// Delivers the pending value if its time has come.
    public func tick(now: Date) {
        guard let value = pending, let due = nextDue, now >= due else { return }
        fire(value, at: now)
    }

    /// When the pending value will go out, if any.
    public var nextDue: Date? {
        guard pending != nil, let last = lastFire else { return nil }
        return last.addingTimeInterval(interval)
    }

    private func fire(_ value: Int, at now: Date) {
        pending = nil
        lastFire = now
        action(value)
    }
}
