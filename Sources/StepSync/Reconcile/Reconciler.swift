import Foundation
import StepLog

/// Finds where the server differs from what the store acknowledged, and
/// corrects the store's acknowledgement state to the truth, so that the
/// ordinary upload repairs the server (docs/RECONCILE.md, "The reconcile").
///
/// The per-day digests of this store's uploader at the server are compared
/// with the store's; each day that differs is narrowed to its ids and content
/// hashes, and an id the day does not explain is looked up. What it learns is
/// written in one go and synced before anything is sent: samples that lose
/// their acknowledgement (missing at the server, or a version lost), samples
/// another store wrote or deleted later (held back, rejected with the
/// reason), deletions lost (pending again), and samples the server provably
/// holds (acknowledged). Only ids the server attributes to this uploader (or
/// to nobody: written before uploaders were recorded) are ever sent again or
/// deleted; another store's are never touched.
///
/// A reconcile killed anywhere leaves the store either as it was or
/// corrected; run again, it finds what is left.
public final class Reconciler {
    /// Ids a lookup asks about at once (the server's limit).
    public static let lookupBatch = 1_000
    /// Differing days named in the report.
    static let daysNamed = 10

    let store: StepLogStore
    let client: APIClient
    let uploader: String
    let now: () -> Date
    /// Called with each day narrowed so far and the number to narrow.
    public var onProgress: ((Int, Int) -> Void)?

    public init(store: StepLogStore, client: APIClient, uploader: String, now: @escaping () -> Date = Date.init) {
        self.store = store
        self.client = client
        self.uploader = uploader
        self.now = now
    }

    /// What the store's correction will be.
    private struct Corrections {
        var acknowledge: [StoredSample] = []
        var unacknowledge: [(sample: StoredSample, reason: String?)] = []
        var deletions: [UUID] = []
    }

    /// Compares the store with the server and corrects the store (unless
    /// `dryRun`). `newDestination`: the store's acknowledgements are another
    /// destination's, so every live sample is compared, none taken as held.
    /// `serverHoldsNone`: the server's digest of this uploader counts no
    /// sample (its days need no request).
    public func run(newDestination: Bool, dryRun: Bool, serverHoldsNone: Bool = false) async throws -> ReconcileReport {
        var report = ReconcileReport()
        report.newDestination = newDestination
        report.dryRun = dryRun
        let local = try StoreDigests.of(store)
        let remote = serverHoldsNone ? [:] : try await serverDays(&report)

        // Each day: fine, wholly held, wholly missing, or to be narrowed.
        var held = Set<Int64>(), missing = Set<Int64>(), narrowed = Set<Int64>()
        let days = Set(local.days.keys).union(remote.keys)
        report.daysCompared = days.count
        for day in days.sorted() {
            let server = remote[day] ?? SamplesDigest()
            let mine = local.days[day] ?? StoreDigests.Day()
            if !newDestination && server == mine.acknowledged { continue }
            report.daysDiffering += 1
            if report.firstDifferingDays.count < Self.daysNamed { report.firstDifferingDays.append(LocalDayCalendar.format(day: day)) }
            if server == mine.live && server.count > 0 {
                held.insert(day)
            } else if server.count == 0 {
                missing.insert(day)
            } else {
                narrowed.insert(day)
            }
        }

        // Against a new destination a rejection was the old one's answer: it ends (the sample is sent again).
        let endsRejection = newDestination
        var corrections = Corrections()
        let samples = try StoreDigests.samples(of: store, on: held.union(missing).union(narrowed))
        for day in held {
            for (stored, rejected) in samples[day] ?? [] {
                if rejected {
                    if endsRejection { corrections.unacknowledge.append((stored, nil)) }
                } else if !stored.isSynced {
                    corrections.acknowledge.append(stored)
                    report.acknowledged += 1
                }
            }
        }
        for day in missing {
            for (stored, rejected) in samples[day] ?? [] where stored.isSynced || (rejected && endsRejection) {
                corrections.unacknowledge.append((stored, nil))
                if stored.isSynced { report.samplesMissing += 1 }
            }
        }
        var unexplained: [StoredSample] = []
        for (position, day) in narrowed.sorted().enumerated() {
            onProgress?(position, narrowed.count)
            let listed = try await serverSamples(on: day, &report)
            var inStore = Set<String>()
            for (stored, rejected) in samples[day] ?? [] {
                let id = stored.id.uuidString
                inStore.insert(id)
                let hash = SampleDigest.hash(stored.sample)
                if listed[id] == hash {
                    if !stored.isSynced {
                        corrections.acknowledge.append(stored) // a rejection ends with it
                        report.acknowledged += 1
                    }
                } else if rejected {
                    if endsRejection {
                        corrections.unacknowledge.append((stored, nil))
                    } else if listed[id] != nil {
                        report.rejectedWithOlderVersionKept += 1
                    }
                } else if !stored.isSynced {
                    continue // waiting for upload: the upload sends it
                } else if listed[id] != nil {
                    corrections.unacknowledge.append((stored, nil))
                    report.versionsDifferent += 1
                } else {
                    unexplained.append(stored)
                }
            }
            // This uploader's ids the store does not hold on this day: lost deletions, unless the
            // store holds them live (on their own day, narrowed there) or its deletion is pending.
            for id in listed.keys where !inStore.contains(id) {
                guard let uuid = UUID(uuidString: id), case .absent = try store.sampleState(id: uuid) else { continue }
                corrections.deletions.append(uuid)
                report.deletionsLost += 1
            }
        }
        try await explain(unexplained, into: &corrections, &report)
        onProgress?(narrowed.count, narrowed.count)

        if !dryRun {
            let at = now()
            try store.markSynced(corrections.acknowledge)
            try store.unacknowledge(corrections.unacknowledge, at: at)
            try store.restoreDeletions(corrections.deletions, at: at)
            try store.sync()
        }
        return report
    }

    /// Acknowledged samples of narrowed days the server does not list as this
    /// uploader's on their day: what the server knows of each decides.
    private func explain(_ samples: [StoredSample], into corrections: inout Corrections, _ report: inout ReconcileReport) async throws {
        var from = 0
        while from < samples.count {
            let batch = samples[from..<min(samples.count, from + Self.lookupBatch)]
            from += batch.count
            report.requests += 1
            let known = Dictionary(try await client.lookup(batch.map(\.id)).samples.map { ($0.id, $0) }, uniquingKeysWith: { $1 })
            for stored in batch {
                if let entry = known[stored.id.uuidString], entry.uploader != uploader, !entry.uploader.isEmpty {
                    // Another store's later word (a version or a deletion): left alone.
                    let what = entry.state == "deleted" ? "deleted" : "written in another version"
                    corrections.unacknowledge.append((stored, "\(what) at the server by another uploader (\(entry.uploader)); left alone"))
                    report.heldByAnotherUploader += 1
                } else if known[stored.id.uuidString] == nil {
                    corrections.unacknowledge.append((stored, nil)) // not at the server at all
                    report.samplesMissing += 1
                } else {
                    // This store's (or nobody's) on another day, or deleted by this store: a version lost.
                    corrections.unacknowledge.append((stored, nil))
                    report.versionsDifferent += 1
                }
            }
        }
    }

    /// The server's digest of each day of this uploader, all pages.
    private func serverDays(_ report: inout ReconcileReport) async throws -> [Int64: SamplesDigest] {
        var days: [Int64: SamplesDigest] = [:]
        var after: String?
        repeat {
            report.requests += 1
            let page = try await client.dayDigests(uploader: uploader, after: after)
            for row in page.days {
                guard let day = LocalDayCalendar.parse(date: row.day), let digest = SamplesDigest(count: row.count, hex: row.digest) else {
                    throw APIError.decodingError(underlying: ReconcileError.malformedAnswer("day digest \(row.day) \(row.digest)"))
                }
                days[day] = digest
            }
            after = page.next
        } while after != nil
        return days
    }

    /// The ids and content hashes the server lists for this uploader on `day`, all pages.
    private func serverSamples(on day: Int64, _ report: inout ReconcileReport) async throws -> [String: UInt64] {
        var listed: [String: UInt64] = [:]
        var after: String?
        let text = LocalDayCalendar.format(day: day)
        repeat {
            report.requests += 1
            let page = try await client.daySamples(uploader: uploader, day: text, after: after)
            for row in page.samples {
                guard row.hash.utf8.count == 16, let hash = UInt64(row.hash, radix: 16) else {
                    throw APIError.decodingError(underlying: ReconcileError.malformedAnswer("hash \(row.hash) of \(row.id)"))
                }
                listed[row.id] = hash
            }
            after = page.next
        } while after != nil
        return listed
    }
}

/// An answer of the digest routes that is not what they promise.
public enum ReconcileError: Error, CustomStringConvertible {
    case malformedAnswer(String)

    public var description: String {
        switch self {
        case .malformedAnswer(let what): return "the server's digest answer is malformed: \(what)"
        }
    }
}
