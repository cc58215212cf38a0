import Foundation

extension StepLogStore {
    // MARK: Destination (docs/RECONCILE.md)

    /// Where the store uploads now (its latest destination record), or nil
    /// when it never recorded one. The synced flags mean "acknowledged by it".
    public var destination: StoreDestination? { locked { state.destination } }

    /// Every destination recorded: the latest record of each, oldest first.
    public var destinations: [StoreDestination] {
        locked { state.destinations.values.sorted { $0.position < $1.position }.map(\.destination) }
    }

    /// Records `destination` as the store's current one (a new server or
    /// account, or the same one proven equal again). The caller corrects the
    /// acknowledgements first (`unacknowledge`, `markSynced`): the record says
    /// they are this destination's. Durable after the next `sync()`.
    public func recordDestination(_ destination: StoreDestination) throws {
        if let problem = destination.validationProblem { throw StepLogError.invalidDestination(reason: problem) }
        try locked {
            _ = try writableWriter()
            let position = try append { DestinationPayload.append(destination, to: $0) }
            state.setDestination(destination, at: position)
        }
    }

    /// Entries a `samplesUnacknowledged` record holds at most (26 bytes each
    /// before its reason, which is cut at 1,024).
    static let unacknowledgementsPerRecord = 10_000

    /// Takes back the acknowledgement of these sample versions (the server
    /// turned out not to hold them), in `samplesUnacknowledged` records: each
    /// is unsynced again, so the upload sends it. With a reason, the version
    /// is also recorded rejected with it (another uploader's version is at
    /// the server: it is not sent until it changes); without one, any
    /// rejection it had ends. A sample whose stored version changed since it
    /// was read (another position), or that is deleted, is skipped; so is one
    /// with nothing to change (unsynced and not rejected, without a reason).
    /// Returns how many were written. Durable after the next `sync()`.
    @discardableResult
    public func unacknowledge(_ samples: [(sample: StoredSample, reason: String?)], at date: Date) throws -> Int {
        let at = Milliseconds.from(date)
        return try locked {
            _ = try writableWriter()
            var entries: [SampleRejection] = []
            var seen = Set<UUIDBytes>()
            for (s, reason) in samples {
                let key = UUIDBytes(s.id)
                guard let entry = state.index.entry(key, at: s.position), !entry.isTombstone, seen.insert(key).inserted else { continue }
                guard entry.isSynced || reason != nil || state.rejections[key] != nil else { continue }
                entries.append(SampleRejection(id: s.id, rejectedAtMilliseconds: at, reason: RejectionPayload.clipped(reason ?? "")))
            }
            var from = 0
            while from < entries.count {
                let chunk = Array(entries[from..<min(entries.count, from + Self.unacknowledgementsPerRecord)])
                let position = try append { RejectionPayload.append(chunk, as: .samplesUnacknowledged, to: $0) }
                try state.applyUnacknowledged(chunk, at: position)
                from += chunk.count
            }
            return entries.count
        }
    }

    /// Deletions the server lost: a tombstone (a pending deletion, sent by the
    /// next upload) for each UUID the store does not hold at all. A UUID that
    /// is live or whose deletion is pending writes nothing. Returns how many
    /// were written. Durable after the next `sync()`.
    @discardableResult
    public func restoreDeletions(_ ids: [UUID], at date: Date) throws -> Int {
        let at = Milliseconds.from(date)
        return try locked {
            _ = try writableWriter()
            var written = 0
            for key in ids.map({ UUIDBytes($0) }) where try state.index.find(key) == nil {
                let position = try append { TombstonePayload.append(key, deletedAt: at, to: $0) }
                try state.applyVersion(key, .tombstone(at: position))
                written += 1
            }
            return written
        }
    }
}
