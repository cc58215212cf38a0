import Foundation

extension StepLogStore {
    /// Upserts samples by UUID: a new UUID is appended unsynced; a sample
    /// identical to the stored version (every field but fetchedAt and origin)
    /// writes nothing and keeps its synced state, unless its origin differs,
    /// which rewrites it keeping the synced state (a relabel); a changed one
    /// is appended and becomes unsynced; one with a pending deletion is
    /// revived (appended, unsynced). Every sample is validated first, so a bad
    /// one rejects the whole call with nothing written. Durable after the next `sync()`.
    @discardableResult
    public func upsert(_ samples: [StepSample], fetchedAt: Date) throws -> UpsertSummary {
        for s in samples {
            if let problem = s.validationProblem { throw StepLogError.invalidSample(id: s.id.uuidString, reason: problem) }
        }
        let fetched = Milliseconds.from(fetchedAt)
        return try locked {
            _ = try writableWriter()
            let index = state.index
            for s in samples { index.prefetch(UUIDBytes(s.id)) }
            var summary = UpsertSummary()
            for s in samples {
                let key = UUIDBytes(s.id)
                var synced = false
                // One read of the stored version both confirms that it is
                // this UUID's (the index keeps only a tag) and compares contents.
                let found = try index.find(key) { entry -> StoredVersion? in
                    if entry.isTombstone { return try sampleKey(at: entry.position) == key ? .deleted : nil }
                    return try withRecord(at: entry.position) { record -> StoredVersion? in
                        guard case .sampleUpsert(let stored) = record else {
                            throw Self.indexPointsElsewhere(record, at: entry.position, expected: .sampleOrTombstone, directory: directory)
                        }
                        guard stored.uuid == key else { return nil }
                        guard stored.hasSameContent(as: s) else { return .changed }
                        return stored.origin == s.origin ? .same : .relabeled
                    }
                }
                if let (existing, stored) = found {
                    switch stored {
                    case .deleted:
                        summary.revived += 1
                    case .same:
                        summary.unchanged += 1
                        continue
                    case .relabeled:
                        summary.relabeled += 1
                        synced = existing.isSynced
                    case .changed:
                        summary.updated += 1
                    }
                } else {
                    summary.inserted += 1
                }
                let position = try append { SamplePayload.append(s, fetchedAt: fetched, synced: synced, to: $0) }
                try state.applyVersion(key, IndexEntry(position: position, synced: synced, origin: s.origin))
            }
            return summary
        }
    }

    private enum StoredVersion { case same, relabeled, changed, deleted }

    /// The UUID of the sample or tombstone record at `position`: how the
    /// index confirms a tag match (`SampleIndex.keyAt`). A record already
    /// written to its segment file (every one but those still in the writer's
    /// buffer) is read from a read-only mapping of the file: a memory load,
    /// no system call (deletions confirm one per UUID).
    func sampleKey(at position: LogPosition) throws -> UUIDBytes {
        if let (_, info) = segment(containing: position) {
            let offset = Int(position.rawValue - info.basePosition)
            let end = offset + RecordFrame.versionKeyBytes
            if end <= Int(info.size) {
                return try SegmentKeyReader.key(in: readers.mapping(for: info, covering: end), at: offset, path: info.path)
            }
        }
        return try withRecord(at: position) { record in
            switch record {
            case .sampleUpsert(let sample): return sample.uuid
            case .sampleDeleted(let tombstone): return tombstone.uuid
            default: throw Self.indexPointsElsewhere(record, at: position, expected: .sampleOrTombstone, directory: directory)
            }
        }
    }

    /// The error for an index entry that points at `record`, which is not what it should be.
    static func indexPointsElsewhere(_ record: RecordView, at position: LogPosition, expected: StepLogError.CorruptionKind.IndexTarget,
                                     directory: String) -> StepLogError {
        .corruption(path: directory, offset: Int64(position.rawValue), kind: .indexPointsElsewhere(found: record.type.rawValue, expected: expected))
    }

    /// `upsert` for any collection of samples.
    @discardableResult
    public func upsert<C: Collection>(_ samples: C, fetchedAt: Date) throws -> UpsertSummary where C.Element == StepSample {
        try upsert(Array(samples), fetchedAt: fetchedAt)
    }

    /// The current version of the live sample with this UUID (nil when it is
    /// absent or its deletion is pending: see `sampleState`).
    public func sample(id: UUID) throws -> StoredSample? {
        try locked {
            guard let entry = try state.index.find(UUIDBytes(id)), !entry.isTombstone else { return nil }
            return try storedSample(at: entry.position, synced: entry.isSynced)
        }
    }

    func storedSample(at position: LogPosition, synced: Bool) throws -> StoredSample {
        try withRecord(at: position) { record in
            guard case .sampleUpsert(let sample) = record else {
                throw Self.indexPointsElsewhere(record, at: position, expected: .sample, directory: directory)
            }
            return Self.storedSample(sample, at: position, synced: synced)
        }
    }

    static func storedSample(_ sample: SamplePayload, at position: LogPosition, synced: Bool) -> StoredSample {
        let r = sample.record
        return StoredSample(sample: r.sample, fetchedAtMilliseconds: r.fetchedAtMilliseconds, isSynced: synced, position: position)
    }

    /// Up to `limit` unsynced samples in log order (the order they were
    /// written: stable across calls and restarts), the upload's
    /// "WHERE synced = false LIMIT n"; versions the server rejected
    /// (`markRejected`) are left out. Samples returned stay unsynced until
    /// `markSynced`, so asking again returns them again. With `after`, starts
    /// after that sample's position (to read ahead of acknowledgements).
    public func unsyncedSamples(limit: Int, after: LogPosition? = nil) throws -> [StoredSample] {
        try locked {
            // Rejected versions are unsynced too; when they are all that is left, no scan.
            guard state.unsyncedCount > 0, limit > 0 else { return [] }
            guard try state.rejections.isEmpty || state.unsyncedCount > state.rejectedCount() else { return [] }
            var result: [StoredSample] = []
            result.reserveCapacity(min(limit, state.unsyncedCount))
            let start = max(state.unsyncedFloor, after ?? .zero)
            try scan(from: start) { position, record in
                if let after, position <= after { return true }
                guard case .sampleUpsert(let sample) = record else { return true }
                let key = sample.uuid
                guard let entry = state.index.entry(key, at: position), !entry.isSynced,
                      !(try state.isRejected(key, versionAt: position)) else { return true }
                result.append(Self.storedSample(sample, at: position, synced: false))
                return result.count < limit
            }
            if after == nil, let first = result.first { state.unsyncedFloor = first.position }
            return result
        }
    }

    /// Marks the given versions acknowledged by the server, in one
    /// `samplesAcknowledged` record. A sample whose stored version changed
    /// since it was read (a different position) is skipped: the new version
    /// still needs uploading. Returns how many were marked. Durable after the
    /// next `sync()`. The samples must be ones the store returned (their
    /// UUID is what the record at their position holds).
    @discardableResult
    public func markSynced<C: Collection>(_ samples: C) throws -> Int where C.Element == StoredSample {
        try locked {
            _ = try writableWriter()
            var ids: [(UUIDBytes, LogPosition)] = []
            ids.reserveCapacity(samples.count)
            var seen = Set<UUIDBytes>()
            for s in samples {
                let key = UUIDBytes(s.id)
                guard let entry = state.index.entry(key, at: s.position), !entry.isSynced, !entry.isTombstone,
                      seen.insert(key).inserted else { continue }
                ids.append((key, s.position))
            }
            try appendAcknowledgements(ids)
            return ids.count
        }
    }

    /// Writes `ids` as `samplesAcknowledged` records (as many as the record
    /// size allows each) and applies them; each is the UUID of the current
    /// version at its position.
    func appendAcknowledgements(_ ids: [(UUIDBytes, LogPosition)]) throws {
        var from = 0
        while from < ids.count {
            let chunk = ids[from..<min(ids.count, from + AcknowledgedPayload.maxCount)]
            _ = try append { AcknowledgedPayload.append(chunk.map(\.0), to: $0) }
            for (id, position) in chunk { try state.applyAcknowledged(id, versionAt: position) }
            from += chunk.count
        }
    }

    /// Position of the first unsynced sample that is not rejected, or nil when
    /// every sample is synced or rejected.
    public func firstUnsyncedPosition() throws -> LogPosition? {
        try unsyncedSamples(limit: 1).first?.position
    }

    /// Calls `body` with the current version of every live sample, in log order.
    public func forEachSample(_ body: (StoredSample) throws -> Void) throws {
        try locked {
            try scan(from: .zero) { position, record in
                guard case .sampleUpsert(let sample) = record,
                      let entry = state.index.entry(sample.uuid, at: position) else { return true }
                try body(Self.storedSample(sample, at: position, synced: entry.isSynced))
                return true
            }
        }
    }
}
