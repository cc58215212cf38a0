import StepLog

/// Every sample of a store in (startDate, id) order, streamed: only a
/// 24-byte key per sample is held (not the samples), then each is read back.
public enum SampleExport {
    public static func forEachSortedByStart(_ store: StepLogStore, _ body: (StepSample) throws -> Void) throws {
        var keys: [(start: Int64, id: UUIDBytes)] = []
        keys.reserveCapacity(store.counts.samples)
        try store.forEachSample { keys.append(($0.sample.startMilliseconds, UUIDBytes($0.id))) }
        // UUIDBytes order is the order of the uppercase UUID strings.
        keys.sort { ($0.start, $0.id.high, $0.id.low) < ($1.start, $1.id.high, $1.id.low) }
        for key in keys {
            guard let stored = try store.sample(id: key.id.uuid) else { continue }
            try body(stored.sample)
        }
    }

    /// All samples sorted (for small stores and tests).
    public static func sortedByStart(_ store: StepLogStore) throws -> [StepSample] {
        var result: [StepSample] = []
        try forEachSortedByStart(store) { result.append($0) }
        return result
    }
}
