/// What a record does to the index, on a lane of it (`SampleIndex+Lanes.swift`):
/// opening a large store applies snapshot entries on two threads, each in
/// its half of the table, counting into counters of its own. The semantics
/// are the plain methods' (`StoreState.swift`); only where the work is done differs.
extension StoreState {
    /// `applyVersion` on `lane`, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyVersion(_ id: UUIDBytes, _ entry: IndexEntry, in lane: SampleIndex.Lane, mixedHash: UInt64,
                      counting c: UnsafeMutablePointer<Counters>) throws {
        let old = try index.set(id, entry, in: lane, mixedHash: mixedHash)
        c.pointee.replace(old, with: entry)
    }

    /// `applyAcknowledged` on `lane`, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyAcknowledged(_ id: UUIDBytes, in lane: SampleIndex.Lane, mixedHash: UInt64,
                           counting c: UnsafeMutablePointer<Counters>) throws {
        guard let entry = try index.find(id, in: lane, mixedHash: mixedHash) else { return }
        switch entry.acknowledgement {
        case .removal:
            try index.remove(id, in: lane, mixedHash: mixedHash)
            c.pointee.pendingDeletions -= 1
        case .syncing:
            try index.update(id, in: lane, mixedHash: mixedHash) { $0.withSynced(true) }
            c.pointee.unsynced -= 1
        case .none:
            break
        }
    }

    /// `applyUnacknowledged` on `lane`, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyUnacknowledged(_ id: UUIDBytes, in lane: SampleIndex.Lane, mixedHash: UInt64,
                             counting c: UnsafeMutablePointer<Counters>) throws {
        guard let entry = try index.find(id, in: lane, mixedHash: mixedHash), !entry.isTombstone, entry.isSynced else { return }
        try index.update(id, in: lane, mixedHash: mixedHash) { $0.withSynced(false) }
        c.pointee.unsynced += 1
    }

    /// `applyRemoved` on `lane`, given the UUID's `mixedHash`, counting into `c`.
    @inline(__always)
    func applyRemoved(_ id: UUIDBytes, in lane: SampleIndex.Lane, mixedHash: UInt64, counting c: UnsafeMutablePointer<Counters>) throws {
        guard let old = try index.remove(id, in: lane, mixedHash: mixedHash) else { return }
        c.pointee.remove(old)
    }

    /// Adds what a lane's thread counted.
    func absorb(_ c: Counters) {
        counters.pointee.unsynced += c.unsynced
        counters.pointee.pendingDeletions += c.pendingDeletions
        counters.pointee.liveByOrigin = counters.pointee.liveByOrigin + c.liveByOrigin
    }
}
