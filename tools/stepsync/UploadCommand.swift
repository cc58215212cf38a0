import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync upload`: stage 2b, unsynced samples to the API server.
enum UploadCommand {
    static let defaultURL = "http://127.0.0.1:8000"

    static let usage = """
        usage: stepsync upload --store DIR [--api-url URL] [--token-file PATH] [--timeout SECONDS] [--max-attempts N] [--in-flight N] [--http-client socket|urlsession] [--json]

        Sends unsynced samples to the API server (POST /steps), 1,000 at a time in the
        order they were stored, and marks each batch synced (durably) once the server
        acknowledged it and every batch before it (four requests in flight by default, marked
        in the order sent; a batch interrupted before its mark is sent again, which the
        server takes idempotently); then the deletions waiting for upload (POST /steps/deletions),
        1,000 ids at a time, each batch marked acknowledged once the server answered 200.
        Connection errors, timeouts and 5xx are retried with exponential backoff and
        jitter, waiting at least what an answer's Retry-After asks (a server whose
        database fails over, a balancer with no healthy server); a 401 (no token, or
        a refused one) and other 4xx stop with the server's message, except a 400
        that names a sample: the batch is split until the refused
        samples are found, the others are uploaded, and the refused ones are recorded
        rejected with the server's reason (kept in the store, shown by stepsync status,
        sent again only once their content changes); the exit status is then 1. Ctrl-C or SIGTERM finishes the batches in flight and exits 130; run the
        same command to continue.

        Then it checks that the server holds what the store acknowledged (docs/RECONCILE.md):
        one request (GET /steps/digest) when nothing differs. A restored backup, rows deleted
        or changed at the server, a deletion lost: the store takes back the acknowledgement of
        what the server lacks (or restores the lost deletions), the upload sends it, and the
        check runs again. Another server or account than the store's last is reconciled as
        new before anything is sent (in practice: every live sample is sent). Samples another
        store of the same user wrote or deleted later are left alone. `stepsync reconcile`
        does the full check on demand.

        The token (for a server that requires one: `tools/api-server/run tokens create
        --user NAME`) comes from --token-file PATH or the STEPSYNC_TOKEN environment
        variable, never from the command line; it is never printed.

        options:
          --store DIR         the StepLog store
          --api-url URL       the API server (default: $STEPSYNC_API_URL, else \(defaultURL))
          --token-file PATH   a file holding the API token (surrounding whitespace ignored;
                              default: $STEPSYNC_TOKEN, else no token)
          --timeout SECONDS   per request (default 30)
          --max-attempts N    attempts per batch before giving up (default 8)
          --in-flight N       requests kept in flight at once, 1-8 (default \(APISyncService.defaultInFlight))
          --http-client C     socket (default for http://: HTTP/1.1 over a socket) or urlsession
                              (URLSession; always used for https://). On Linux, URLSession keeps
                              a core busy while it waits, which a server on the same machine needs.
          --json              print the summary as JSON
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        return try await run(arguments, command: "upload", full: false)
    }

    /// `stepsync upload`, or `stepsync reconcile` (`full`: the reconcile runs
    /// even when the digests agree; `--dry-run` is accepted).
    static func run(_ arguments: [String], command: String, full: Bool) async throws -> Int32 {
        if arguments.contains(where: { $0 == "--token" || $0.hasPrefix("--token=") }) {
            throw Arguments.UsageError("--token is not accepted: a command line is visible to every user of the machine; use --token-file PATH or STEPSYNC_TOKEN")
        }
        let args = try Arguments(arguments, options: ["store", "api-url", "token-file", "timeout", "max-attempts", "in-flight", "http-client"],
                                 flags: full ? ["json", "dry-run"] : ["json"])
        let dryRun = args.has("dry-run")
        try args.expectPositionals(0, "")
        let storePath = try args.required("store")
        let url = args.value("api-url") ?? ProcessInfo.processInfo.environment["STEPSYNC_API_URL"] ?? defaultURL
        let timeout = try args.integer("timeout", default: 30, in: 1...3_600)
        let attempts = try args.integer("max-attempts", default: 8, in: 1...1_000)
        let inFlight = try args.integer("in-flight", default: APISyncService.defaultInFlight, in: 1...8)
        let kind = args.value("http-client") ?? (url.hasPrefix("https:") ? "urlsession" : "socket")
        let token = try UploadToken.resolve(file: args.value("token-file"), environment: ProcessInfo.processInfo.environment,
                                            warn: { StepSyncTool.err.line("stepsync \(command): warning: \($0)") })
        guard kind == "socket" || kind == "urlsession" else { throw Arguments.UsageError("--http-client must be socket or urlsession, found '\(kind)'") }
        let err = StepSyncTool.err
        let trap = SignalTrap { _ in err.line("\nstepsync \(command): stopping after the batches in flight (again to quit at once)") }

        let opening = Date()
        let store = try StepLogStore.open(storePath, options: try TestCompactionKnob.apply(to: StoreOptions(createIfMissing: false)))
        let openSeconds = Date().timeIntervalSince(opening)
        defer { try? store.close() }
        if let torn = store.openReport.tornTail {
            err.line("stepsync \(command): recovered from an interrupted write: dropped \(torn.bytesDropped) bytes at the end of \(torn.segment)")
        }
        let uploader = CheckedUpload.uploader(of: store)
        let client: APIClient
        do {
            if kind == "socket" {
                client = try SocketAPIClient(baseURL: url, timeout: TimeInterval(timeout), token: token, connections: inFlight, uploader: uploader.uuidString)
            } else {
                client = try LiveAPIClient(baseURL: url, timeout: TimeInterval(timeout), token: token, connections: inFlight, uploader: uploader.uuidString)
            }
        } catch let error as APIError {
            throw Arguments.UsageError("--api-url: \(error)" + (kind == "socket" && url.hasPrefix("https:") ? " (the socket client speaks plain http; use --http-client urlsession)" : ""))
        }
        let kinds = try StoreSourceKinds.of(store)
        if kinds.isMixed {
            err.line("stepsync \(command): warning: \(storePath) holds \(Format.count(kinds.mockSamples)) samples of the mock beside \(Format.count(kinds.realSamples)) real ones, "
                     + "and uploads them too; stepsync forget --store \(storePath) --source mock removes them here, and with the next upload at the server")
        }
        do {
            guard try await client.healthCheck() else {
                throw APIError.serverUnreachable(url: url, reason: "GET /health did not answer {\"status\":\"ok\"}")
            }
        } catch let error as APIError {
            err.line("stepsync \(command): \(error); is the server running? \(startHint(url: url, withToken: token != nil))")
            return 1
        }

        let progress = ProgressLine()
        let service = APISyncService(store: store, client: client, retry: RetryPolicy(maxAttempts: attempts), inFlight: inFlight,
                                     stop: trap.stop)
        service.onProgress = { p in
            let deletions = p.deletionsTotal > 0 ? ", \(Format.count(p.deletionsAcknowledged)) of \(Format.count(p.deletionsTotal)) deletions" : ""
            progress.update("uploading: \(Format.count(p.batches)) batches, \(ProgressLine.counts(p.samplesSynced, of: p.samplesTotal, elapsed: p.seconds, unit: " samples"))" + deletions + (p.retries > 0 ? ", \(p.retries) retries" : ""),
                            force: p.samplesSynced >= p.samplesTotal && p.deletionsAcknowledged >= p.deletionsTotal)
        }
        service.onRetry = { attempt, wait, error in
            progress.finish()
            err.line("stepsync \(command): \(error); retrying in \(String(format: "%.1f", wait)) s (attempt \(attempt) of \(attempts))")
        }
        let checked = CheckedUpload(store: store, client: client, service: service, url: url, uploader: uploader)
        checked.onStage = { stage in
            // A stage is a moment on a terminal's redrawn line; in a log it would be a line of its own
            // before every upload's answer (counts and errors say what happened).
            guard stage != "uploading", progress.isInteractive else { return }
            progress.update("\(stage)…", force: true)
        }
        checked.onReconcileProgress = { done, total in progress.update("reconciling: \(Format.count(done)) of \(Format.count(total)) days narrowed") }
        let result: CheckedUploadSummary
        do {
            result = try await checked.run(full: full, dryRun: dryRun)
        } catch is StoppedByRequest {
            progress.finish()
            // The same command, every option as given (the token's file, not the token).
            let again = ShellCommand.line(["stepsync", command] + arguments + (args.value("api-url") == nil ? ["--api-url", url] : []))
            err.line("stepsync \(command): paused; every acknowledged batch is marked synced. To continue: \(again)")
            return 130
        } catch let error as APIError {
            progress.finish()
            let counts = store.counts
            let left = "\(Format.count(counts.unsyncedSamples)) samples still unsynced" + (counts.pendingDeletions > 0 ? ", \(Format.count(counts.pendingDeletions)) deletions still waiting" : "")
            err.line("stepsync \(command): \(error); \(left)" + (error.isRetryable ? " (gave up after \(attempts) attempts; run again to resume)" : ""))
            return 1
        }
        progress.finish()
        let summary = result.upload
        let counts = store.counts
        let rejectedEarlier = counts.rejectedSamples - summary.samplesRejected - result.reconciles.reduce(0) { $0 + $1.heldByAnotherUploader }
        TestCompactionKnob.finish(store)
        try store.close()
        let rate = summary.seconds > 0 ? Double(summary.samplesSynced) / summary.seconds : 0
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", storePath)
            w.field("apiURL", url)
            w.field("batches", summary.batches)
            w.field("samplesSynced", summary.samplesSynced)
            w.field("samplesSavedByServer", summary.samplesSavedByServer)
            w.field("deletionBatches", summary.deletionBatches)
            w.field("deletionsAcknowledged", summary.deletionsAcknowledged)
            w.field("deletionsAppliedByServer", summary.deletionsAppliedByServer)
            w.field("samplesRejected", summary.samplesRejected)
            w.key("firstRejections"); w.beginArray()
            for r in summary.firstRejections {
                w.beginObject(); w.field("id", r.id.uuidString); w.field("reason", r.reason); w.endObject()
            }
            w.endArray()
            w.field("retries", summary.retries)
            w.field("intervalsSynced", summary.intervalsSynced)
            w.key("seconds"); w.value(summary.seconds)
            w.key("samplesPerSecond"); w.value(rate)
            w.key("openSeconds"); w.value(openSeconds)
            StatusCommand.writeCounts(counts, into: &w)
            ReconcileOutput.write(result, uploader: uploader, into: &w)
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("upload complete: \(url)")
            out.line("  \(Format.count(summary.samplesSynced)) samples in \(Format.count(summary.batches - summary.deletionBatches)) batches (\(Format.count(summary.samplesSavedByServer)) new to the server), \(Format.count(summary.deletionsAcknowledged)) deletions in \(Format.count(summary.deletionBatches)) batches (\(Format.count(summary.deletionsAppliedByServer)) were live at the server), \(summary.retries) retries, \(Format.duration(summary.seconds)) (\(Format.count(Int(rate))) samples/s)")
            out.line("  store: \(Format.count(counts.syncedSamples)) synced, \(Format.count(counts.unsyncedSamples)) unsynced, \(Format.count(counts.rejectedSamples)) rejected, \(Format.count(counts.pendingDeletions)) deletions waiting; \(Format.count(summary.intervalsSynced)) intervals now synced")
            for line in ReconcileOutput.lines(result, acknowledged: counts.syncedSamples) { out.line("  " + line) }
        }
        if rejectedEarlier > 0 {
            err.line("stepsync \(command): \(Format.count(rejectedEarlier)) samples the server rejected earlier were not sent again (they are sent once their content changes; see stepsync status --store \(storePath))")
        }
        if result.unchecked {
            err.line("stepsync \(command): not checked: the server at \(url) has no GET /steps/digest (a version before reconciliation), so what it holds cannot be compared with what the store acknowledged; update the server (docs/RECONCILE.md)")
        } else if !result.provenEqual && !dryRun {
            err.line("stepsync \(command): the server still differs from what the store acknowledged after the repair; run stepsync reconcile --store \(storePath) --api-url \(url) to see where")
            return 1
        }
        if summary.samplesRejected > 0 {
            let first = summary.firstRejections.first.map { " (first: \($0.id.uuidString): \($0.reason))" } ?? ""
            err.line("stepsync \(command): the server rejected \(Format.count(summary.samplesRejected)) samples\(first); every other sample was uploaded. They are kept in the store and listed by stepsync status --store \(storePath)")
            return 1
        }
        return 0
    }

    /// How to start a server for this upload on this machine: one that wants
    /// the token given, or a --single-user one when no token was given.
    static func startHint(url: String, withToken: Bool) -> String {
        let port = URLComponents(string: url)?.port.map(String.init) ?? "PORT"
        return withToken
            ? "(on this machine: tools/api-server/run --port \(port); its tokens: tools/api-server/run tokens create --user NAME)"
            : "(on this machine: tools/api-server/run --single-user --port \(port), a server for one person that takes no token)"
    }
}
