import Foundation

/// A bounded hand-off of `ExportChunk`s between the thread that reads (and
/// inflates) the export and the thread that scans it: a fixed set of chunks
/// circulates, so memory stays at `count × capacity` however large the file,
/// and whichever side is faster waits for the other.
///
/// `@unchecked Sendable`: every mutable field is guarded by `condition`.
final class ExportChunkQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var free: [ExportChunk]
    private var ready: [ExportChunk] = []
    private var readyHead = 0
    private var producerFinished = false
    private var failure: Error?
    private var cancelled = false

    init(chunks: Int, chunkCapacity: Int) {
        free = (0..<chunks).map { _ in ExportChunk(capacity: chunkCapacity) }
    }

    // MARK: Producer side

    /// A chunk to fill, waiting for one to be recycled; nil once the consumer cancelled.
    func takeFree() -> ExportChunk? {
        condition.lock()
        defer { condition.unlock() }
        while free.isEmpty, !cancelled { condition.wait() }
        return cancelled ? nil : free.removeLast()
    }

    func publish(_ chunk: ExportChunk) {
        condition.lock()
        ready.append(chunk)
        condition.broadcast()
        condition.unlock()
    }

    /// The producer is done, after an error or at the end of its input.
    func finish(error: Error?) {
        condition.lock()
        failure = error
        producerFinished = true
        condition.broadcast()
        condition.unlock()
    }

    // MARK: Consumer side

    /// The next filled chunk, in order; nil after the last. Throws the
    /// producer's error once every chunk produced before it was delivered.
    func next() throws -> ExportChunk? {
        condition.lock()
        defer { condition.unlock() }
        while readyHead == ready.count, !producerFinished { condition.wait() }
        if readyHead < ready.count {
            let chunk = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: true)
                readyHead = 0
            }
            return chunk
        }
        if let failure { throw failure }
        return nil
    }

    func recycle(_ chunk: ExportChunk) {
        condition.lock()
        free.append(chunk)
        condition.broadcast()
        condition.unlock()
    }

    /// Stops the producer (it sees nil from `takeFree`) and waits until it has
    /// finished, so no thread outlives the read.
    func cancelAndWait() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        while !producerFinished { condition.wait() }
        condition.unlock()
    }
}
