import Foundation

extension StepLogStore {
    /// Deletes samples by UUID, as their source deleted them: each live one
    /// gets a tombstone (a pending deletion, until `markDeletionsAcknowledged`)
    /// and stops being a sample (`sample(id:)`, `forEachSample` and the
    /// unsynced batches no longer see it). A UUID already deleted, or unknown,
    /// writes nothing. An upsert of a deleted UUID revives it. Durable after
    /// the next `sync()`.
    @discardableResult
    public func delete<C: Collection>(_ ids: C, at date: Date) throws -> DeleteSummary where C.Element == UUID {
        let at = Milliseconds.from(date)
        return try locked {
            _ = try writableWriter()
            let index = state.index
            let keys = ids.map { UUIDBytes($0) }
            for key in keys { index.prefetch(key) }
            var summary = DeleteSummary()
            for key in keys {
                guard let entry = try index.find(key) else {
                    summary.unknown += 1
                    continue
                }
                if entry.isTombstone {
                    summary.alreadyDeleted += 1
                    continue
                }
                let position = try append { TombstonePayload.append(key, deletedAt: at, to: $0) }
                try state.applyVersion(key, .tombstone(at: position))
                summary.deleted += 1
            }
            return summary
        }
    }

    /// Up to `limit` pending deletions in log order (stable across calls and
    /// restarts): what the upload sends the server. They stay pending until
    /// `markDeletionsAcknowledged`, so asking again returns them again. With
    /// `after`, starts after that tombstone's position.
    public func pendingDeletions(limit: Int, after: LogPosition? = nil) throws -> [StoredDeletion] {
        try locked {
            guard state.pendingDeletionCount > 0, limit > 0 else { return [] }
            var result: [StoredDeletion] = []
            result.reserveCapacity(min(limit, state.pendingDeletionCount))
            let start = max(state.deletionFloor, after ?? .zero)
            try scan(from: start) { position, record in
                if let after, position <= after { return true }
                guard case .sampleDeleted(let tombstone) = record, state.index.entry(tombstone.uuid, at: position) != nil else { return true }
                result.append(StoredDeletion(id: tombstone.uuid.uuid, deletedAtMilliseconds: tombstone.deletedAtMilliseconds, position: position))
                return result.count < limit
            }
            if after == nil, let first = result.first { state.deletionFloor = first.position }
            return result
        }
    }

    /// Records that the server acknowledged these deletions, in one
    /// `samplesAcknowledged` record: each UUID whose tombstone is still the
    /// one given (same position) leaves the store entirely. A UUID revived,
    /// or deleted again, since it was read is skipped. Returns how many were
    /// acknowledged. Durable after the next `sync()`.
    @discardableResult
    public func markDeletionsAcknowledged<C: Collection>(_ deletions: C) throws -> Int where C.Element == StoredDeletion {
        try locked {
            _ = try writableWriter()
            var ids: [(UUIDBytes, LogPosition)] = []
            ids.reserveCapacity(deletions.count)
            var seen = Set<UUIDBytes>()
            for d in deletions {
                let key = UUIDBytes(d.id)
                guard let entry = state.index.entry(key, at: d.position), entry.isTombstone,
                      seen.insert(key).inserted else { continue }
                ids.append((key, d.position))
            }
            try appendAcknowledgements(ids)
            return ids.count
        }
    }

    /// What the store knows of `id`: its live version, its pending deletion, or nothing.
    public func sampleState(id: UUID) throws -> SampleState {
        try locked {
            guard let entry = try state.index.find(UUIDBytes(id)) else { return .absent }
            if !entry.isTombstone { return .live(try storedSample(at: entry.position, synced: entry.isSynced)) }
            return .deletionPending(try storedDeletion(at: entry.position))
        }
    }

    func storedDeletion(at position: LogPosition) throws -> StoredDeletion {
        try withRecord(at: position) { record in
            guard case .sampleDeleted(let tombstone) = record else {
                throw Self.indexPointsElsewhere(record, at: position, expected: .tombstone, directory: directory)
            }
            return StoredDeletion(id: tombstone.uuid.uuid, deletedAtMilliseconds: tombstone.deletedAtMilliseconds, position: position)
        }
    }

    // MARK: Source anchors

    /// Records the state a provider reached after a completed ingest of a
    /// source family (an export's date, a HealthKit anchor): the latest per
    /// family wins. At most 65,536 bytes. Durable after the next `sync()`.
    public func recordSourceAnchor(family: String, anchor: [UInt8]) throws {
        guard anchor.count <= FormatConstants.maxAnchorBytes else {
            throw StepLogError.anchorTooLarge(family: family, bytes: anchor.count)
        }
        let key = SourceFamily.fingerprint(family)
        try locked {
            let position = try append { SourceAnchorPayload.append(family: key, anchor: anchor, to: $0) }
            state.anchors[key] = (anchor, position)
        }
    }

    /// The anchor last recorded for `family`, or nil.
    public func sourceAnchor(family: String) -> [UInt8]? {
        locked { state.anchors[SourceFamily.fingerprint(family)]?.anchor }
    }
}
