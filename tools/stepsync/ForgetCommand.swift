import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync forget --source mock`: removes the mock's samples from a store
/// where they ended up beside real ones.
enum ForgetCommand {
    static let usage = """
        usage: stepsync forget --store DIR --source mock [--json]

        Deletes every sample of the mock (--source mock, bundle com.apple.health.mock)
        from the store: for a store where the mock's made-up steps ended up beside real ones
        (stepsync status says so). Real samples are untouched. The deletions are tombstones,
        1,000 a batch, each synced; the next stepsync upload sends them to the server
        (POST /steps/deletions), which then no longer counts the mock's samples either.
        Ctrl-C or SIGTERM stops after a batch (exit 130); run the same command to continue.
        Prints how many samples were deleted and how many were kept.

        options:
          --store DIR      the StepLog store
          --source mock    what to forget: the mock's samples (the only kind a store holds by mistake)
          --json           {"store","source","deleted","alreadyDeleted","kept",…counts}
        """

    static func run(_ arguments: [String]) throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store", "source"], flags: ["json"])
        try args.expectPositionals(0, "")
        let storePath = try args.required("store")
        let source = try args.required("source")
        guard source == "mock" else {
            throw Arguments.UsageError("--source must be mock, found '\(source)' (real samples leave a store when their source no longer has them)")
        }
        let err = StepSyncTool.err
        let trap = SignalTrap { _ in err.line("\nstepsync forget: stopping after this batch (again to quit at once)") }
        let store = try StepLogStore.open(storePath, options: StoreOptions(createIfMissing: false))
        defer { try? store.close() }
        var ids: [UUID] = []
        try store.forEachSampleSpan { span in
            if StoreSourceKinds.isMock(span) { ids.append(span.id.uuid) }
        }
        let progress = ProgressLine()
        let summary: DeleteSummary
        do {
            summary = try DeletionService.delete(ids, from: store, stop: trap.stop, onProgress: { done, total in
                progress.update("forgetting: \(Format.count(done)) of \(Format.count(total)) mock samples", force: done == total)
            })
        } catch is StoppedByRequest {
            progress.finish()
            err.line("stepsync forget: paused; the deletions written so far are saved. To continue: stepsync forget --store \(storePath) --source mock")
            return 130
        }
        progress.finish()
        let counts = store.counts
        try store.close()
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("store", storePath)
            w.field("source", "mock")
            w.field("deleted", summary.deleted)
            w.field("alreadyDeleted", summary.alreadyDeleted)
            w.field("kept", counts.samples)
            StatusCommand.writeCounts(counts, into: &w)
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("forgot \(Format.count(summary.deleted)) samples of the mock; \(Format.count(counts.samples)) samples kept")
            out.line("  \(Format.count(counts.pendingDeletions)) deletions wait for the next upload (stepsync upload --store \(storePath) …)")
        }
        return 0
    }
}
