/// Decides when a writer compacts on its own (Pebble's compaction picker):
/// once its estimated dead bytes reach both `StoreOptions.compactionDeadBytes`
/// and `compactionDeadFraction` of its segment bytes. Asked on open and each
/// time a segment is sealed, with the store's mutex held.
enum CompactionPicker {
    /// True when `store`'s dead bytes call for a compaction.
    static func isDue(_ store: StepLogStore) -> Bool {
        let options = store.options
        guard options.compactionDeadBytes > 0 else { return false }
        let (dead, total) = estimatedDeadBytes(store)
        return dead >= options.compactionDeadBytes && Double(dead) >= options.compactionDeadFraction * Double(total)
    }

    /// Dead bytes of the store, estimated: its bytes less headers, less what
    /// the live samples and pending tombstones take, sized from up to 64
    /// current versions read at index slots (hash order: an unbiased pick).
    static func estimatedDeadBytes(_ store: StepLogStore) -> (dead: Int64, total: Int64) {
        let total = store.totalBytes()
        let headers = store.segments.reduce(Int64(0)) { $0 + $1.dataStart }
        struct Enough: Error {}
        var sampled = 0
        var sampledBytes = 0
        try? store.state.index.forEach { entry in
            guard !entry.isTombstone else { return }
            sampledBytes += try store.withRecord(at: entry.position) { $0.frameSize }
            sampled += 1
            if sampled == 64 { throw Enough() }
        }
        let mean = sampled > 0 ? Double(sampledBytes) / Double(sampled) : 0
        let state = store.state
        let live = Int64(mean * Double(state.sampleCount)) + Int64(state.pendingDeletionCount * TombstonePayload.frameSize)
        return (max(0, total - headers - live), total)
    }
}
