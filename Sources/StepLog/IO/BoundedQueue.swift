import Foundation

/// A blocking first-in, first-out hand-off between threads, bounded by the
/// total weight of what waits in it: a producer that gets ahead waits for the
/// consumer. Replay hands parsed chunks from its reading thread to the
/// applier through one; the export reader circulates a fixed set of buffers
/// through two (filled ones forward, empty ones back).
///
/// `cancel()` ends it for good: waiting and later `put`s return false and
/// drop their item, `take` returns nil, and what was queued is dropped.
///
/// `@unchecked Sendable`: every mutable field is guarded by `condition`.
public final class BoundedQueue<Element: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [(element: Element, weight: Int)] = []
    private var head = 0
    private var load = 0
    private let capacity: Int
    private var cancelled = false

    /// `capacity`: the most weight that may wait (an item always fits an
    /// empty queue, whatever its weight).
    public init(capacity: Int) {
        self.capacity = capacity
    }

    /// Waits while adding `weight` would pass the capacity, then appends.
    /// False once cancelled (the element is dropped).
    @discardableResult
    public func put(_ element: Element, weight: Int = 1) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while load + weight > capacity && load > 0 && !cancelled { condition.wait() }
        if cancelled { return false }
        items.append((element, weight))
        load += weight
        condition.broadcast()
        return true
    }

    /// The oldest element, waiting for one; nil once cancelled.
    public func take() -> Element? {
        condition.lock()
        defer { condition.unlock() }
        while head == items.count && !cancelled { condition.wait() }
        if cancelled { return nil }
        let (element, weight) = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        load -= weight
        condition.broadcast()
        return element
    }

    /// Wakes both sides for good; later calls return at once.
    public func cancel() {
        condition.lock()
        cancelled = true
        items.removeAll()
        head = 0
        load = 0
        condition.broadcast()
        condition.unlock()
    }
}
