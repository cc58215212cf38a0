import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync ingest`: the source's deletions planned (and refused, before
/// anything is written, when a guard says so), stage 1 (layering), stage 2a
/// (fetch), then the deletions applied as tombstones; resuming whatever an
/// earlier run left.
enum IngestCommand {
    static let usage = """
        usage: stepsync ingest --store DIR --source SOURCE [--restart] [--allow-deletions | --keep-deleted] [--json]

        Layers the source's data into intervals of at most 10,000 steps (cheap aggregate
        queries), then fetches each pending interval's samples into the store (upsert by
        UUID, 1,000 a batch, synced before the interval is marked fetched). Running it
        again resumes where the last run stopped; with nothing left it changes nothing.
        Ctrl-C or SIGTERM pauses at a safe point (exit 130); run the same command to continue.
        An export is read first, whole, before anything is stored: records that cannot be
        samples or break the sample contract are skipped and reported (--json: read.malformed,
        read.outOfContract); a structural error in the file stores nothing. Ctrl-C during
        the read stops it at once and leaves the store as it was.
        Samples the source no longer has are deleted (tombstones, sent by the next upload):
        the mock's churn reports them; an export is a snapshot, so every stored sample
        from an earlier export that started before its ExportDate and is absent from it
        is deleted. An export older than the last one imported, or one that would delete
        more than 5% of the stored export samples, is refused before anything is written.
        Prints "N new, M changed, D deleted".
        A store holds one kind of source: the mock's made-up steps are refused in a store
        that holds real ones, and a real source in a store that holds the mock's (stepsync
        status shows what a store holds; stepsync forget --source mock removes the mock's).

        options:
          --store DIR       the StepLog store (created when missing)
          --source SOURCE   a path to an Apple Health export.zip / export.xml, or
                            mock[:seed=S,days=D,end=YYYY-MM-DD,perDay=N,watch=0|1,churn=P,latency=MS]
                            for made-up steps (mock alone: seed 42, 730 days ending today, UTC)
          --restart         forget every interval (clearAllIntervals) and layer again;
                            samples already stored are kept
          --allow-deletions apply an export's deletions even past 5% of the stored export samples
          --keep-deleted    only add: delete nothing, no guards (an older export may then
                            bring back samples a newer one deleted)
          --json            print the summary as JSON
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store", "source"], flags: ["restart", "json", "allow-deletions", "keep-deleted"])
        try args.expectPositionals(0, "")
        if args.has("allow-deletions") && args.has("keep-deleted") {
            throw Arguments.UsageError("--allow-deletions and --keep-deleted cannot go together")
        }
        let storePath = try args.required("store")
        let sourceText = try SourceFactory.requiredSource(args)
        let spec = try SourceSpec.parse(sourceText)
        try SourceFactory.check(spec)
        let err = StepSyncTool.err
        let trap = SignalTrap { _ in err.line("\nstepsync ingest: stopping at the next safe point (again to quit at once)") }

        // An existing store is opened first, so that a locked or damaged one is
        // reported before a long export read; a new one is created only once
        // the source has been read, so a mistyped --source leaves nothing behind.
        func openStore() throws -> StepLogStore {
            let store = try StepLogStore.open(storePath, options: try TestCompactionKnob.apply(to: StoreOptions()))
            if let torn = store.openReport.tornTail {
                err.line("stepsync ingest: recovered from an interrupted write: dropped \(torn.bytesDropped) bytes at the end of \(torn.segment)")
            }
            return store
        }
        var opened = FileManager.default.fileExists(atPath: storePath) ? try openStore() : nil
        defer { try? opened?.close() }
        // A store that holds the other kind of source is refused here too, before the read.
        if let store = opened {
            try SourceMixRefusal.check(sourceIsMock: spec.isMock, kinds: try StoreSourceKinds.of(store), store: storePath)
        }
        // The same command, every option as given but --restart (what it cleared is cleared).
        let resume = ShellCommand.line(["stepsync", "ingest"] + arguments.filter { $0 != "--restart" })
        let provider: StepDataProvider
        do {
            provider = try SourceFactory.provider(for: spec, progress: ProgressLine(), stop: trap.stop)
        } catch is StoppedByRequest {
            err.line("stepsync ingest: stopped while reading the export; nothing was stored. To continue: \(resume)")
            return 130
        }
        if opened == nil { opened = try openStore() }
        let store = opened!
        let progress = ProgressLine()
        let deletion = DeletionService(provider: provider, store: store,
                                       options: DeletionOptions(allowMassDeletion: args.has("allow-deletions"),
                                                                keepDeleted: args.has("keep-deleted")),
                                       sourceName: sourceText, stop: trap.stop)
        // Before anything is written: a refusal leaves the store as it was.
        let planStarted = Date()
        let plan = try await deletion.plan()
        var deletionSeconds = (plan: Date().timeIntervalSince(planStarted), apply: 0.0)
        let layering = LayeringService(provider: provider, store: store, stop: trap.stop)
        if args.has("restart") { try layering.clearAllIntervals() }
        layering.onProgress = { p in
            progress.update("layering: \(Format.count(p.intervalsFound)) intervals, \(Format.count(p.queries)) queries, \(Format.percent(p.fractionDone)) of the range (\(p.status))",
                            force: p.status == "done")
        }
        let layered: LayeringSummary
        do {
            layered = try await layering.performLayering()
        } catch is StoppedByRequest {
            progress.finish()
            err.line("stepsync ingest: paused during layering; intervals found so far are saved. To continue: \(resume)")
            return 130
        }
        progress.finish()
        if layered.sourceChanged {
            err.line("stepsync ingest: the store's intervals came from another source; layered again (stored samples are kept unless the source no longer has them)")
        }

        let fetch = FetchService(provider: provider, store: store, stop: trap.stop)
        fetch.alreadyStored = plan?.deletions.alreadyStored
        fetch.onProgress = { p in
            progress.update("fetching: \(ProgressLine.counts(p.intervalsFetched, of: p.intervalsTotal, elapsed: p.seconds, unit: " intervals")), \(Format.count(p.samples)) samples",
                            force: p.intervalsFetched == p.intervalsTotal)
        }
        let fetched: FetchSummary
        do {
            fetched = try await fetch.fetchPending()
        } catch is StoppedByRequest {
            progress.finish()
            err.line("stepsync ingest: paused during fetching; every sample fetched so far is saved. To continue: \(resume)")
            return 130
        }
        progress.finish()

        var deleted = DeleteSummary()
        if let plan {
            deletion.onProgress = { done, total in
                progress.update("deleting: \(Format.count(done)) of \(Format.count(total)) samples the source no longer has",
                                force: done == total)
            }
            do {
                let applyStarted = Date()
                deleted = try deletion.apply(plan)
                deletionSeconds.apply = Date().timeIntervalSince(applyStarted)
            } catch is StoppedByRequest {
                progress.finish()
                err.line("stepsync ingest: paused while deleting; deletions written so far are saved. To continue: \(resume)")
                return 130
            }
            progress.finish()
        }
        let counts = store.counts
        TestCompactionKnob.finish(store)
        try store.close()
        printSummary(spec: provider.sourceIdentity, shown: spec.isMock ? provider.sourceIdentity : sourceText, store: storePath, read: (provider as? AppleHealthExportProvider)?.summary,
                     layered: layered, fetched: fetched, plan: plan, deleted: deleted, deletionSeconds: deletionSeconds,
                     counts: counts, json: args.has("json"))
        return 0
    }

    /// `spec` is the source's identity (in `--json`); `shown`, how the text names it
    /// (the mock's canonical spelling, an export's path).
    static func printSummary(spec: String, shown: String, store: String, read: ExportReadSummary?,
                             layered: LayeringSummary, fetched: FetchSummary, plan: DeletionPlan?, deleted: DeleteSummary,
                             deletionSeconds: (plan: Double, apply: Double),
                             counts: StoreCounts, json: Bool) {
        let new = fetched.samples.inserted + fetched.samples.revived
        let changed = fetched.samples.updated
        let out = StepSyncTool.out
        let storeShare = fetched.seconds > 0 ? fetched.storeSeconds / fetched.seconds : 0
        let rate = fetched.seconds > 0 ? Double(fetched.samplesSeen) / fetched.seconds : 0
        if json {
            var w = JSONWriter()
            w.beginObject()
            w.field("source", spec)
            w.field("store", store)
            if let read {
                w.key("read")
                SourceFactory.write(read, into: &w)
            }
            w.key("layering"); w.beginObject()
            w.field("intervalsRecorded", layered.intervalsRecorded)
            w.field("intervalsKept", layered.intervalsKept)
            w.field("queries", layered.queries)
            w.field("sourceChanged", layered.sourceChanged)
            w.key("seconds"); w.value(layered.seconds)
            w.endObject()
            w.key("fetch"); w.beginObject()
            w.field("intervalsFetched", fetched.intervalsFetched)
            w.field("samplesInserted", fetched.samples.inserted)
            w.field("samplesUpdated", fetched.samples.updated)
            w.field("samplesUnchanged", fetched.samples.unchanged)
            w.field("samplesRevived", fetched.samples.revived)
            w.field("samplesRelabeled", fetched.samples.relabeled)
            w.field("batches", fetched.batches)
            w.key("seconds"); w.value(fetched.seconds)
            w.key("samplesPerSecond"); w.value(rate)
            w.key("storeShare"); w.value(storeShare)
            w.endObject()
            w.key("deletions"); w.beginObject()
            if let plan {
                w.field("family", plan.family)
                w.field("reported", plan.deletions.ids.count)
                if let compared = plan.deletions.comparedWith {
                    w.field("comparedWith", compared)
                    w.field("withReplacement", plan.deletions.withReplacement)
                    w.field("replacedBySyncVersion", plan.deletions.replacedBySyncVersion)
                }
            } else {
                w.field("reported", 0)
            }
            w.field("deleted", deleted.deleted)
            w.field("alreadyDeleted", deleted.alreadyDeleted)
            w.field("unknown", deleted.unknown)
            w.key("planSeconds"); w.value(deletionSeconds.plan)
            w.key("applySeconds"); w.value(deletionSeconds.apply)
            w.endObject()
            w.field("new", new)
            w.field("changed", changed)
            w.field("deleted", deleted.deleted)
            StatusCommand.writeCounts(counts, into: &w)
            w.endObject()
            out.line(w.string)
            return
        }
        out.line("ingest complete: \(shown)")
        out.line("  \(Format.count(new)) new, \(Format.count(changed)) changed, \(Format.count(deleted.deleted)) deleted")
        if let replaced = plan?.deletions.replacedBySyncVersion, replaced > 0 {
            out.line("  of the deleted, \(Format.count(replaced)) replaced by a newer sync version its app saved")
        }
        out.line("  layering: \(Format.count(layered.intervalsRecorded)) intervals recorded, \(Format.count(layered.intervalsKept)) kept from before, \(Format.count(layered.queries)) aggregate queries, \(Format.duration(layered.seconds))")
        out.line("  fetch: \(Format.count(fetched.intervalsFetched)) intervals, \(Format.count(fetched.samplesSeen)) samples (\(Format.count(fetched.samples.inserted)) new, \(Format.count(fetched.samples.updated)) changed, \(Format.count(fetched.samples.unchanged)) unchanged) in \(Format.count(fetched.batches)) batches, \(Format.duration(fetched.seconds)) (\(Format.count(Int(rate))) samples/s, \(Format.percent(storeShare)) of it in StepLog)")
        out.line("  store: \(store): \(Format.count(counts.samples)) samples (\(Format.count(counts.unsyncedSamples)) unsynced), \(Format.count(counts.intervalTotal)) intervals, \(Format.bytes(counts.bytes)) in \(Format.count(counts.segments, "segment"))")
    }
}
