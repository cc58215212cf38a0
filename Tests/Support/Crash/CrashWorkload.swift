import Foundation
import StepLog

/// A deterministic, resumable history written to a store, noting what it
/// means in an `ExpectationLog` and marking each acknowledgement. `prepare`
/// builds the starting store (not recorded); `run` is the recorded part and
/// continues where a failed run stopped (a batch's last record is its
/// layering range, so the number of ranges says which batch is next).
public struct CrashWorkload: Sendable {
    public enum Kind: String, CaseIterable, Sendable {
        /// Ingest into a fresh store: upserts, changed versions, marks synced,
        /// deletions and their acknowledgements, intervals; a sync per batch,
        /// pipelined as ingest's (`syncInBackground`).
        case ingest
        /// The same, resuming a store whose newest segment ends in torn bytes.
        case resumeTorn = "resume-torn"
        /// Tiny segments: rolls, index snapshots, synced-through records at every turn.
        case manySegments = "many-segments"
        /// Compaction of a store with dead versions, then more batches.
        case compaction
        /// Compaction in the background of a store in use: batches written
        /// and acknowledged between its steps, then more batches.
        case backgroundCompaction = "background-compaction"
        /// Upload's path: unsynced samples marked synced (acknowledgement
        /// records) and pending deletions acknowledged, a sync per chunk.
        case upload
        /// A reconcile's corrections on an uploaded store: acknowledgements
        /// taken back (some held back with a reason), lost deletions restored,
        /// the destination recorded, a sync after each; then the repairs
        /// uploaded (docs/RECONCILE.md).
        case reconcile
    }

    public var kind: Kind
    /// Batches in the whole history (prepared ones included).
    public var batches: Int
    public var batchSize: Int
    public var options: StoreOptions

    public init(_ kind: Kind, scale: Int = 1) {
        self.kind = kind
        var options = StoreOptions(segmentSize: 1 << 20)
        options.preallocationSize = 16 << 10   // fills, and their syncs, every few batches
        options.writeBufferSize = 4 << 10      // records reach the file during a batch
        switch kind {
        case .ingest, .resumeTorn:
            batches = 6 * scale; batchSize = 30
        case .manySegments:
            options.segmentSize = 8 << 10
            options.preallocationSize = 2 << 10
            batches = 8 * scale; batchSize = 20
        case .compaction, .backgroundCompaction:
            options.segmentSize = 12 << 10
            batches = 6 * scale; batchSize = 20
        case .upload, .reconcile:
            batches = 4 * scale; batchSize = 30
        }
        options.compactionDeadBytes = 0 // only the compactions the workload runs
        self.options = options
    }

    /// Batches written before recording starts.
    var preparedBatches: Int {
        switch kind {
        case .ingest, .manySegments: return 0
        case .resumeTorn: return batches / 2
        case .compaction, .backgroundCompaction, .upload, .reconcile: return batches
        }
    }

    /// Builds the starting store in `directory` (acknowledged in `log`).
    public func prepare(_ directory: String, log: ExpectationLog) throws {
        guard preparedBatches > 0 else { return }
        let store = try StepLogStore.open(directory, options: options)
        var b = store.layeringRanges.count
        while b < preparedBatches {
            try batch(b, store: store, log: log, markSynced: kind != .upload) { _ in }
            b += 1
        }
        try store.close()
        if kind == .resumeTorn {
            // A torn tail: half a record's worth of bytes after the last one.
            let segment = segmentPaths(directory).last!
            let handle = FileHandle(forWritingAtPath: segment)!
            handle.seekToEndOfFile()
            handle.write(Data([0x4e, 0, 0, 0, 1, 0x12, 0x34, 0x56, 0x78] + [UInt8](repeating: 0xab, count: 40)))
            try handle.close()
        }
    }

    /// The recorded part; throws what the store threw (a failed run).
    public func run(_ directory: String, log: ExpectationLog, acknowledge: (ExpectationLog.Mark) -> Void) throws {
        switch kind {
        case .ingest, .resumeTorn, .manySegments:
            try batches(directory, upTo: batches, log: log, acknowledge: acknowledge)
        case .compaction:
            _ = try StepLogStore.compact(directory: directory, options: options)
            acknowledge(log.mark(ranges: batches))
            try batches(directory, upTo: batches + 2, log: log, acknowledge: acknowledge)
        case .backgroundCompaction:
            let store = try StepLogStore.open(directory, options: options)
            var closed = false
            defer { if !closed { try? store.close() } }
            var b = store.layeringRanges.count
            // A batch at a few of the compaction's steps: before the copy, after
            // its first output, after the commit, at the end.
            try withoutActuallyEscaping(acknowledge) { acknowledge in
                _ = try store.compactInBackground(stop: { step in
                    switch step {
                    case .started, .outputWritten(0), .committed, .finished:
                        if b < batches + 4 {
                            try batch(b, store: store, log: log, markSynced: true, acknowledge: acknowledge)
                            b += 1
                        }
                    default: break
                    }
                })
            }
            while b < batches + 6 {
                try batch(b, store: store, log: log, markSynced: true, acknowledge: acknowledge)
                b += 1
            }
            closed = true
            try store.close()
        case .reconcile:
            let store = try StepLogStore.open(directory, options: options)
            defer { try? store.close() }
            if store.destination == nil {
                try reconcile(store, log: log, acknowledge: acknowledge)
            }
            try upload(store, log: log, acknowledge: acknowledge)
            try store.close()
        case .upload:
            let store = try StepLogStore.open(directory, options: options)
            defer { try? store.close() }
            try upload(store, log: log, acknowledge: acknowledge)
            try store.close()
        }
    }

    /// A reconcile's corrections: every third acknowledged live sample taken
    /// back (every other chunk with a reason: held back), deletions restored
    /// for UUIDs the store no longer holds, then the destination; a sync and
    /// an acknowledgement after each. Resumable: what a failed run wrote is
    /// no longer acknowledged, so it is not written again.
    private func reconcile(_ store: StepLogStore, log: ExpectationLog, acknowledge: (ExpectationLog.Mark) -> Void) throws {
        var live: [StoredSample] = []
        try store.forEachSample { live.append($0) }
        let chosen = live.enumerated().filter { $0.offset % 3 == 0 && $0.element.isSynced }.map(\.element)
        var from = 0
        while from < chosen.count {
            let chunk = chosen[from..<min(chosen.count, from + 10)]
            let reason: String? = (from / 10) % 2 == 1 ? "written later by another uploader" : nil
            for s in chunk { log.note(s.id, .live(count: s.sample.count, synced: false)) }
            _ = try store.unacknowledge(chunk.map { ($0, reason) }, at: Date(timeIntervalSince1970: 20))
            try store.sync()
            acknowledge(log.mark(ranges: batches))
            from += chunk.count
        }
        let lost = (0..<6).map { Self.sample(8_000_000 + $0, version: 0).id }
        for id in lost where try store.sampleState(id: id) == .absent { log.note(id, .deletionPending) }
        _ = try store.restoreDeletions(lost, at: Date(timeIntervalSince1970: 21))
        try store.sync()
        acknowledge(log.mark(ranges: batches))
        try store.recordDestination(StoreDestination(serverId: "crash-server", user: "alice", url: "http://127.0.0.1:8000",
                                                     uploader: Self.sample(7_000_000, version: 0).id,
                                                     recordedAtMilliseconds: 22_000, provenEqualAtMilliseconds: 0))
        try store.sync()
        acknowledge(log.mark(ranges: batches))
    }

    /// Upload's acknowledgements: unsynced samples marked synced, then pending
    /// deletions acknowledged, a sync after each chunk.
    private func upload(_ store: StepLogStore, log: ExpectationLog, acknowledge: (ExpectationLog.Mark) -> Void) throws {
        while true {
            let chunk = try store.unsyncedSamples(limit: 25)
            if chunk.isEmpty { break }
            for s in chunk { log.note(s.sample.id, .live(count: s.sample.count, synced: true)) }
            _ = try store.markSynced(chunk)
            try store.sync()
            acknowledge(log.mark(ranges: batches))
        }
        while true {
            let chunk = try store.pendingDeletions(limit: 7)
            if chunk.isEmpty { break }
            for d in chunk { log.note(d.id, .absent) }
            _ = try store.markDeletionsAcknowledged(chunk)
            try store.sync()
            acknowledge(log.mark(ranges: batches))
        }
    }

    /// Batches the way `stepsync ingest` writes them: pipelined, batch b+1
    /// written while batch b syncs (`syncInBackground`), batch b acknowledged
    /// once its ticket is durable.
    private func batches(_ directory: String, upTo end: Int, log: ExpectationLog,
                         acknowledge: (ExpectationLog.Mark) -> Void) throws {
        let store = try StepLogStore.open(directory, options: options)
        var closed = false
        defer { if !closed { try? store.close() } }
        var b = store.layeringRanges.count
        var syncing: (ticket: DurabilityTicket, mark: ExpectationLog.Mark)?
        while b < end {
            try write(b, store: store, log: log, markSynced: true)
            let ticket = try store.syncInBackground()
            let mark = log.pendingMark(ranges: b + 1)
            if let (previous, covered) = syncing {
                try store.waitUntilDurable(previous)
                acknowledge(log.settle(covered))
            }
            syncing = (ticket, mark)
            b += 1
        }
        if let (last, covered) = syncing {
            try store.waitUntilDurable(last)
            acknowledge(log.settle(covered))
        }
        closed = true
        try store.close()
    }

    /// The next run after a crash: one more small batch, synced.
    public func continueRun(_ store: StepLogStore) throws {
        let samples = (0..<5).map { Self.sample(9_000_000 + $0, version: 0) }
        _ = try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: 9))
        try store.sync()
    }

    static func sample(_ n: Int, version: Int) -> StepSample {
        let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012x", n))!
        return StepSample(id: id, startMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000,
                          endMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000 + 45_000,
                          count: 1 + (n * 7 + version * 13) % 500, sourceBundleId: "com.apple.health",
                          sourceDeviceName: n % 3 == 0 ? nil : "Apple Watch",
                          // Every origin, and a new version of a sample relabelled, so that the
                          // store's counts by origin are checked in every state (`CrashChecker`).
                          origin: SampleOrigin(rawValue: UInt8((n + version) % 4))!)
    }

    /// Batch `b`, synced and acknowledged.
    private func batch(_ b: Int, store: StepLogStore, log: ExpectationLog, markSynced: Bool,
                       acknowledge: (ExpectationLog.Mark) -> Void) throws {
        try write(b, store: store, log: log, markSynced: markSynced)
        try store.sync()
        acknowledge(log.mark(ranges: b + 1))
    }

    /// Batch `b`'s records, noted in `log`, not synced: upserts (a changed
    /// version of an earlier sample among them), marks synced, deletions and
    /// their acknowledgements, an interval, and last its layering range.
    private func write(_ b: Int, store: StepLogStore, log: ExpectationLog, markSynced: Bool) throws {
        var samples = (0..<batchSize).map { Self.sample(b * batchSize + $0, version: 0) }
        if b >= 2 { samples.append(Self.sample((b - 2) * batchSize + b % batchSize, version: b)) }
        // A re-run (after a failure) re-upserts what may already be stored:
        // identical content writes nothing and keeps the synced state.
        for s in samples {
            if case .live(let count, _) = try ExpectationLog.state(of: s.id, in: store), count == s.count { continue }
            log.note(s.id, .live(count: s.count, synced: false))
        }
        _ = try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: Double(b)))
        if markSynced && b % 2 == 1 {
            let unsynced = try store.unsyncedSamples(limit: .max)
            for s in unsynced { log.note(s.sample.id, .live(count: s.sample.count, synced: true)) }
            _ = try store.markSynced(unsynced)
        }
        if b >= 3 {
            let ids = (0..<3).map { Self.sample((b - 3) * batchSize + $0, version: 0).id }
            // Deleting what is absent (its deletion already acknowledged) writes nothing.
            for id in ids where try ExpectationLog.state(of: id, in: store) != .absent { log.note(id, .deletionPending) }
            _ = try store.delete(ids, at: Date(timeIntervalSince1970: Double(b)))
        }
        if markSynced && b % 4 == 2 {
            let pending = try store.pendingDeletions(limit: .max)
            for d in pending { log.note(d.id, .absent) }
            _ = try store.markDeletionsAcknowledged(pending)
        }
        try store.recordIntervals([SyncInterval(id: UUID(uuidString: String(format: "00000000-0000-4000-9000-%012x", b % 5))!,
                                                startMilliseconds: Int64(b % 5), endMilliseconds: Int64(b % 5) + 1,
                                                stepCount: Int64(b), status: .fetched)])
        try store.recordLayeringRange(LayeringRange(startMilliseconds: Int64(b), endMilliseconds: Int64(b) + 1))
    }
}

func segmentPaths(_ directory: String) -> [String] {
    ((try? Directory.names(in: directory)) ?? []).filter { $0.hasSuffix(".log") }.sorted().map { Directory.join(directory, $0) }
}
