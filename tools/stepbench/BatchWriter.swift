import Foundation
import StepLog

/// Makes batches durable the way a writer that acknowledges each batch does,
/// and times it. Pipelined: after batch k+1 is written and its sync started,
/// wait for batch k's (`syncInBackground` / `waitUntilDurable`), so batch k+1
/// is encoded while the disk makes batch k durable. Otherwise: write, then
/// `sync()`.
struct BatchWriter {
    let store: StepLogStore
    let pipelined: Bool
    private var previous: DurabilityTicket?
    /// Seconds in writing and syncing (or waiting for syncs).
    private(set) var seconds = 0.0
    /// Of which: in `sync()`, or waiting for a batch's sync (pipelined).
    private(set) var syncSeconds = 0.0

    init(store: StepLogStore, pipelined: Bool) {
        self.store = store
        self.pipelined = pipelined
    }

    /// Runs `body` (the batch's writes) and makes the batch durable (not
    /// pipelined) or the one before it (pipelined).
    mutating func write<T>(_ body: () throws -> T) throws -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        let result = try body()
        let written = DispatchTime.now().uptimeNanoseconds
        if pipelined {
            let ticket = try store.syncInBackground()
            if let previous { try store.waitUntilDurable(previous) }
            previous = ticket
        } else {
            try store.sync()
        }
        let end = DispatchTime.now().uptimeNanoseconds
        seconds += Double(end - start) / 1e9
        syncSeconds += Double(end - written) / 1e9
        return result
    }

    /// Waits for the last batch's sync.
    mutating func finish() throws {
        guard let previous else { return }
        let (_, waited) = try measure { try store.waitUntilDurable(previous) }
        seconds += waited
        syncSeconds += waited
        self.previous = nil
    }
}
