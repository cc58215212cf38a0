import Foundation
import StepLog

/// What a checked upload did: the reconciles it ran, the uploads, and whether
/// the server was proven to hold exactly what the store acknowledged.
public struct CheckedUploadSummary: Sendable {
    public var serverId = ""
    public var user = ""
    /// The uploads (the first, and the one that sent the repairs, added up).
    public var upload = UploadSummary()
    /// The reconciles run: against a new destination first, then on a difference.
    public var reconciles: [ReconcileReport] = []
    /// The server's digest equals the store's acknowledged samples'.
    public var provenEqual = false
    /// Requests of the check and the reconciles (the upload's are in `upload`).
    public var checkRequests = 0
    public var checkSeconds = 0.0
    /// Of `checkSeconds`: the store's passes that computed its acknowledged
    /// digest, and the `GET /steps/digest` requests.
    public var checkStoreSeconds = 0.0
    public var checkRequestSeconds = 0.0
    /// The server offers no `GET /steps/digest` (a version before
    /// reconciliation): the upload ran, but nothing could be checked.
    public var unchecked = false
}

/// `stepsync upload` and `stepsync reconcile`: the upload, with the check that
/// the server holds what the store acknowledged (docs/RECONCILE.md).
///
/// 1. `GET /steps/digest` names the server and user. A destination other than
///    the store's is reconciled as new before anything is sent, and recorded.
/// 2. The ordinary upload sends what is pending (`APISyncService`).
/// 3. The check: the server's digest of this store's uploader against the
///    store's acknowledged samples (the answer of step 1 when nothing was
///    sent). On a difference (or always, `full`) the store is reconciled,
///    the repairs are uploaded, and the check runs again.
/// 4. Equal: the destination is recorded proven equal, with the time.
public final class CheckedUpload {
    let store: StepLogStore
    let client: APIClient
    let service: APISyncService
    let url: String
    let uploader: UUID
    let now: () -> Date
    public var onReconcileProgress: ((Int, Int) -> Void)?
    /// Called when a stage starts ("checking", "reconciling", …), for progress lines.
    public var onStage: ((String) -> Void)?

    /// `client` must send `uploader` with its writes (`APIClient.uploader`).
    public init(store: StepLogStore, client: APIClient, service: APISyncService, url: String, uploader: UUID,
                now: @escaping () -> Date = Date.init) {
        self.store = store
        self.client = client
        self.service = service
        self.url = url
        self.uploader = uploader
        self.now = now
    }

    /// The uploader id a store uses: the one its destination records hold, or a new one.
    public static func uploader(of store: StepLogStore) -> UUID {
        store.destination?.uploader ?? UUID()
    }

    /// Runs the checked upload. `full`: reconcile even when the digests are
    /// equal (`stepsync reconcile`). `dryRun`: compare and report only,
    /// writing and sending nothing.
    public func run(full: Bool = false, dryRun: Bool = false) async throws -> CheckedUploadSummary {
        var summary = CheckedUploadSummary()
        let started = Date()
        let id = uploader.uuidString
        onStage?("checking")
        var answer: UploaderDigestResponse
        do {
            answer = try await digest(&summary)
        } catch APIError.serverError(statusCode: 404, _, _) where !full && !dryRun {
            return try await uploadUnchecked(summary, started: started)
        }
        summary.serverId = answer.serverId
        summary.user = answer.user
        let current = store.destination
        let newDestination = current.map { $0.serverId != answer.serverId || $0.user != answer.user } ?? true
        let reconciler = Reconciler(store: store, client: client, uploader: id, now: now)
        reconciler.onProgress = onReconcileProgress
        if newDestination {
            onStage?("reconciling with a new destination")
            let report = try await reconciler.run(newDestination: true, dryRun: dryRun, serverHoldsNone: answer.count == 0)
            summary.reconciles.append(report)
            summary.checkRequests += report.requests
            if dryRun {
                summary.checkSeconds = Date().timeIntervalSince(started)
                return summary
            }
            try record(answer, proven: false)
        } else if dryRun {
            let report = try await reconciler.run(newDestination: false, dryRun: true)
            summary.reconciles.append(report)
            summary.checkRequests += report.requests
            let equal = try isEqual(answer, &summary)
            summary.provenEqual = report.corrections == 0 && report.rejectedWithOlderVersionKept == 0 && equal
            summary.checkSeconds = Date().timeIntervalSince(started)
            return summary
        }
        var checkSeconds = Date().timeIntervalSince(started)

        onStage?("uploading")
        summary.upload = try await service.syncAll()
        let checkStarted = Date()
        onStage?("checking")
        if summary.upload.batches > 0 || newDestination {
            answer = try await digest(&summary)
        }
        var equal = try isEqual(answer, &summary)
        if !equal || full {
            onStage?("reconciling")
            let report = try await reconciler.run(newDestination: false, dryRun: false)
            summary.reconciles.append(report)
            summary.checkRequests += report.requests
            if report.corrections > 0 {
                onStage?("uploading repairs")
                let repairs = try await service.syncAll()
                onStage?("checking")
                checkSeconds -= repairs.seconds // the upload's time is not the check's
                add(repairs, to: &summary.upload)
            }
            answer = try await digest(&summary)
            equal = try isEqual(answer, &summary)
        }
        if equal { try record(answer, proven: true) }
        summary.provenEqual = equal
        summary.checkSeconds = checkSeconds + Date().timeIntervalSince(checkStarted)
        return summary
    }

    /// The upload to a server without `GET /steps/digest`, which can neither
    /// name itself nor say what it holds: it is recorded as a destination
    /// known by its URL alone (no server id, no user). Against any other
    /// destination the store's acknowledgements are taken back first, as
    /// when the server holds nothing (it may hold anything: sending again is
    /// harmless, every write is an upsert), so that what it lacks is sent.
    private func uploadUnchecked(_ start: CheckedUploadSummary, started: Date) async throws -> CheckedUploadSummary {
        var summary = start
        summary.unchecked = true
        let unnamed = StoreDestination(serverId: "", user: "", url: url, uploader: uploader,
                                       recordedAtMilliseconds: Milliseconds.from(now()), provenEqualAtMilliseconds: 0)
        let current = store.destination
        if current.map({ !$0.isSame(as: unnamed) || $0.url != url }) ?? true {
            onStage?("reconciling with a new destination")
            let reconciler = Reconciler(store: store, client: client, uploader: uploader.uuidString, now: now)
            let report = try await reconciler.run(newDestination: true, dryRun: false, serverHoldsNone: true)
            summary.reconciles.append(report)
            try store.recordDestination(unnamed)
            try store.sync()
        }
        summary.checkSeconds = Date().timeIntervalSince(started)
        onStage?("uploading")
        summary.upload = try await service.syncAll()
        return summary
    }

    /// The server's digest of this store's uploader (`GET /steps/digest`), timed.
    private func digest(_ summary: inout CheckedUploadSummary) async throws -> UploaderDigestResponse {
        let started = Date()
        let answer = try await client.digest(uploader: uploader.uuidString)
        summary.checkRequests += 1
        summary.checkRequestSeconds += Date().timeIntervalSince(started)
        return answer
    }

    /// The server's digest of this uploader equals the store's acknowledged samples'.
    private func isEqual(_ answer: UploaderDigestResponse, _ summary: inout CheckedUploadSummary) throws -> Bool {
        guard let remote = SamplesDigest(count: answer.count, hex: answer.digest) else {
            throw APIError.decodingError(underlying: ReconcileError.malformedAnswer("digest \(answer.digest)"))
        }
        let started = Date()
        defer { summary.checkStoreSeconds += Date().timeIntervalSince(started) }
        return remote == (try StoreDigests.acknowledged(of: store))
    }

    /// Records the destination (proven equal now, or keeping when it last was), durably.
    private func record(_ answer: UploaderDigestResponse, proven: Bool) throws {
        let at = Milliseconds.from(now())
        let earlier = store.destinations.first { $0.serverId == answer.serverId && $0.user == answer.user }
        try store.recordDestination(StoreDestination(serverId: answer.serverId, user: answer.user, url: url, uploader: uploader,
                                                     recordedAtMilliseconds: at,
                                                     provenEqualAtMilliseconds: proven ? at : earlier?.provenEqualAtMilliseconds ?? 0))
        try store.sync()
    }

    private func add(_ more: UploadSummary, to total: inout UploadSummary) {
        total.batches += more.batches
        total.samplesSynced += more.samplesSynced
        total.samplesSavedByServer += more.samplesSavedByServer
        total.deletionBatches += more.deletionBatches
        total.deletionsAcknowledged += more.deletionsAcknowledged
        total.deletionsAppliedByServer += more.deletionsAppliedByServer
        total.samplesRejected += more.samplesRejected
        total.firstRejections += more.firstRejections
        total.retries += more.retries
        total.intervalsSynced += more.intervalsSynced
        total.seconds += more.seconds
    }
}
