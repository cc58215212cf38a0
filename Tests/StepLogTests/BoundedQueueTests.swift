import Foundation
import Testing
@testable import StepLog

/// The hand-off between replay's reader and applier, and between the export
/// reader's two threads: order, the weight bound, and cancellation waking
/// both sides.
@Suite struct BoundedQueueTests {
    @Test func deliversInOrderAcrossThreads() {
        let queue = BoundedQueue<Int>(capacity: 3)
        let producer = Thread {
            for i in 0..<10_000 { queue.put(i) }
        }
        producer.start()
        var seen: [Int] = []
        for _ in 0..<10_000 { seen.append(queue.take()!) }
        #expect(seen == Array(0..<10_000))
    }

    @Test func aProducerWaitsWhileTheWeightIsAtCapacity() {
        let queue = BoundedQueue<String>(capacity: 4)
        queue.put("heavy", weight: 4)
        let putDone = DispatchSemaphore(value: 0)
        let producer = Thread {
            queue.put("light")
            putDone.signal()
        }
        producer.start()
        #expect(putDone.wait(timeout: .now() + 0.2) == .timedOut)      // full: it waits
        #expect(queue.take() == "heavy")
        #expect(putDone.wait(timeout: .now() + 10) == .success)         // room again
        #expect(queue.take() == "light")
        // An item heavier than the capacity still fits an empty queue.
        #expect(queue.put("huge", weight: 100))
        #expect(queue.take() == "huge")
    }

    @Test func cancelWakesBothSidesForGood() {
        let full = BoundedQueue<Int>(capacity: 1)
        full.put(1)
        let empty = BoundedQueue<Int>(capacity: 1)
        let results = ResultBox()
        let blockedPut = Thread { results.set(put: full.put(2)) }
        let blockedTake = Thread { results.set(take: empty.take()) }
        blockedPut.start()
        blockedTake.start()
        usleep(50_000)
        full.cancel()
        empty.cancel()
        #expect(results.wait())
        #expect(results.put == false && results.took == .some(nil))
        #expect(!full.put(3) && full.take() == nil)
    }
}

/// What the two blocked threads returned (set from their threads).
private final class ResultBox: @unchecked Sendable {
    private let condition = NSCondition()
    private(set) var put: Bool?
    private(set) var took: Int??

    func set(put value: Bool) {
        condition.lock(); put = value; condition.broadcast(); condition.unlock()
    }

    func set(take value: Int?) {
        condition.lock(); took = .some(value); condition.broadcast(); condition.unlock()
    }

    /// Waits (up to 10 s) until both are set.
    func wait() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(10)
        while put == nil || took == nil {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }
}
