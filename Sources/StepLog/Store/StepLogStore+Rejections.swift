import Foundation

extension StepLogStore {
    /// Records that the server refused these sample versions for a reason of
    /// their own, in one `samplesRejected` record: each stays in the store,
    /// counted as rejected and no longer returned by `unsyncedSamples`, until
    /// a new version of it is written (changed content, a revival). A sample
    /// whose stored version changed since it was read (another position), or
    /// that is synced or deleted, is skipped. Returns how many were recorded.
    /// Durable after the next `sync()`.
    @discardableResult
    public func markRejected(_ rejected: [(sample: StoredSample, reason: String)], at date: Date) throws -> Int {
        let at = Milliseconds.from(date)
        return try locked {
            _ = try writableWriter()
            var list: [SampleRejection] = []
            var seen = Set<UUIDBytes>()
            for (s, reason) in rejected {
                let key = UUIDBytes(s.id)
                guard let entry = state.index.entry(key, at: s.position), entry.isUnsyncedLive,
                      seen.insert(key).inserted else { continue }
                list.append(SampleRejection(id: s.id, rejectedAtMilliseconds: at, reason: RejectionPayload.clipped(reason)))
            }
            guard !list.isEmpty else { return 0 }
            let position = try append { RejectionPayload.append(list, to: $0) }
            state.recordRejections(list, at: position)
            return list.count
        }
    }

    /// Up to `limit` live samples whose current version the server rejected,
    /// oldest rejection first, each with the server's reason.
    public func rejectedSamples(limit: Int = .max) throws -> [RejectedSample] {
        try locked {
            let current = try state.rejections
                .filter { try state.isRejectionCurrent($0.key, recordedAt: $0.value.position) }
                .sorted { ($0.value.position, $0.key.high, $0.key.low) < ($1.value.position, $1.key.high, $1.key.low) }
                .prefix(limit)
            return try current.map { key, value in
                guard let entry = try state.index.find(key) else { preconditionFailure("a current rejection's sample is in the index") }
                return RejectedSample(sample: try storedSample(at: entry.position, synced: false), rejection: value.rejection)
            }
        }
    }
}
