import Foundation

/// What one `upsert` call did.
public struct UpsertSummary: Hashable, Sendable {
    /// UUIDs not seen before: appended, unsynced.
    public var inserted = 0
    /// Known UUIDs whose content changed: appended, unsynced again.
    public var updated = 0
    /// Known UUIDs with identical content: nothing written, synced state kept.
    public var unchanged = 0

    public init(inserted: Int = 0, updated: Int = 0, unchanged: Int = 0) {
        self.inserted = inserted
        self.updated = updated
        self.unchanged = unchanged
    }

    public static func += (a: inout UpsertSummary, b: UpsertSummary) {
        a.inserted += b.inserted
        a.updated += b.updated
        a.unchanged += b.unchanged
    }
}

extension StepLogStore {
    /// Upserts samples by UUID: a new UUID is appended unsynced; a sample
    /// identical to the stored version (every field but fetchedAt) writes
    /// nothing and keeps its synced state; a changed one is appended and
    /// becomes unsynced. Every sample is validated first, so a bad one rejects
    /// the whole call with nothing written. Durable after the next `sync()`.
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
                if let existing = index.find(key) {
                    let same = try withRecord(at: existing.position) { type, payload in
                        type == RecordType.sampleUpsert.rawValue && SamplePayload.hasSameContent(payload, as: s)
                    }
                    if same {
                        summary.unchanged += 1
                        continue
                    }
                    summary.updated += 1
                } else {
                    summary.inserted += 1
                }
                let position = try append { SamplePayload.appendRecord(s, fetchedAt: fetched, synced: false, to: $0) }
                state.applySampleVersion(key, position: position, synced: false)
            }
            return summary
        }
    }

    /// `upsert` for any collection of samples.
    @discardableResult
    public func upsert<C: Collection>(_ samples: C, fetchedAt: Date) throws -> UpsertSummary where C.Element == StepSample {
        try upsert(Array(samples), fetchedAt: fetchedAt)
    }

    /// The stored version of the sample with this UUID.
    public func sample(id: UUID) throws -> StoredSample? {
        try locked {
            guard let entry = state.index.find(UUIDBytes(id)) else { return nil }
            return try storedSample(at: entry.position, synced: entry.isSynced)
        }
    }

    func storedSample(at position: LogPosition, synced: Bool) throws -> StoredSample {
        try withRecord(at: position) { type, payload in
            guard type == RecordType.sampleUpsert.rawValue else {
                throw StepLogError.corruption(path: directory, offset: Int64(position.rawValue),
                                              reason: "index points at a record of type \(type), not a sample")
            }
            return try Self.storedSample(payload, at: position, synced: synced, directory: directory)
        }
    }

    static func storedSample(_ payload: UnsafeRawBufferPointer, at position: LogPosition, synced: Bool,
                             directory: String) throws -> StoredSample {
        switch SamplePayload.decode(payload) {
        case .success(let r):
            return StoredSample(sample: r.sample, fetchedAtMilliseconds: r.fetchedAtMilliseconds,
                                isSynced: synced, position: position)
        case .failure(let problem):
            throw StepLogError.corruption(path: directory, offset: Int64(position.rawValue), reason: problem.description)
        }
    }

    /// Up to `limit` unsynced samples in log order (the order they were
    /// written: stable across calls and restarts), the upload's
    /// "WHERE synced = false LIMIT n". Samples returned stay unsynced until
    /// `markSynced`, so asking again returns them again. With `after`, starts
    /// after that sample's position (to read ahead of acknowledgements).
    public func unsyncedSamples(limit: Int, after: LogPosition? = nil) throws -> [StoredSample] {
        try locked {
            guard state.unsyncedCount > 0, limit > 0 else { return [] }
            var result: [StoredSample] = []
            result.reserveCapacity(min(limit, state.unsyncedCount))
            let start = max(state.unsyncedFloor, after ?? .zero)
            try scan(from: start) { position, type, payload in
                if let after, position <= after { return true }
                guard type == RecordType.sampleUpsert.rawValue else { return true }
                let key = SamplePayload.uuid(payload)
                guard let entry = state.index.find(key), entry.position == position, !entry.isSynced else { return true }
                result.append(try Self.storedSample(payload, at: position, synced: false, directory: directory))
                return result.count < limit
            }
            if after == nil, let first = result.first { state.unsyncedFloor = first.position }
            return result
        }
    }

    /// Marks the given versions acknowledged by the server, in one
    /// `samplesSynced` record. A sample whose stored version changed since it
    /// was read (a different position) is skipped: the new version still needs
    /// uploading. Returns how many were marked. Durable after the next `sync()`.
    @discardableResult
    public func markSynced<C: Collection>(_ samples: C) throws -> Int where C.Element == StoredSample {
        try locked {
            _ = try writableWriter()
            var ids: [UUIDBytes] = []
            ids.reserveCapacity(samples.count)
            var seen = Set<UUIDBytes>()
            for s in samples {
                let key = UUIDBytes(s.id)
                guard let entry = state.index.find(key), entry.position == s.position, !entry.isSynced,
                      seen.insert(key).inserted else { continue }
                ids.append(key)
            }
            let perRecord = (FormatConstants.maxRecordPayload - 4) / 16
            var from = 0
            while from < ids.count {
                let chunk = ids[from..<min(ids.count, from + perRecord)]
                _ = try append { buffer in
                    RecordFrame.append(type: .samplesSynced, to: buffer) { b in
                        b.append(UInt32(chunk.count))
                        for id in chunk { b.append(id) }
                    }
                }
                for id in chunk { state.applySynced(id) }
                from += perRecord
            }
            return ids.count
        }
    }

    /// Position of the first unsynced sample, or nil when every sample is synced.
    public func firstUnsyncedPosition() throws -> LogPosition? {
        try unsyncedSamples(limit: 1).first?.position
    }

    /// Calls `body` with the current version of every sample, in log order.
    public func forEachSample(_ body: (StoredSample) throws -> Void) throws {
        try locked {
            try scan(from: .zero) { position, type, payload in
                guard type == RecordType.sampleUpsert.rawValue else { return true }
                guard let entry = state.index.find(SamplePayload.uuid(payload)), entry.position == position else { return true }
                try body(try Self.storedSample(payload, at: position, synced: entry.isSynced, directory: directory))
                return true
            }
        }
    }
}
