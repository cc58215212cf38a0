import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync today`: seed 004's ratchet from the command line.
enum TodayCommand {
    static let usage = """
        usage: stepsync today --store DIR [--live N] [--source SOURCE] [--goal N] [--tz ZONE] [--now TIME] [--json]

        Today's steps that never go backwards: the maximum of the live reading (--live,
        the pedometer's count), the verified total for the current local day so far
        (overlapping sources counted once, as the Health app does: docs/TOTALS.md), and the
        high score saved in the store for that day. The verified total comes from the
        samples in the store (those the last ingest brought; in a store that also holds
        real samples, never the mock's), or with --source from that source. A new high
        score is saved (durably) for later runs. Prints steps, goal, progress and steps
        remaining, and where each number came from.

        options:
          --store DIR       the StepLog store (created when missing)
          --live N          a live pedometer reading for today
          --source SOURCE   read today's samples from this source instead of the store: an
                            export, or mock[:…] (which here includes today's made-up steps so far)
          --goal N          the daily goal (default 10,000)
          --tz ZONE         IANA time zone of the day, e.g. Europe/Paris (default: the
                            system's); --time-zone, its old name, still works for now
          --now TIME        the current time, ISO 8601 (default: now), e.g. to look at an export's day
          --json            {"date","timeZone","steps","goal","goalReached","progress","stepsRemaining",
                            "pedometer","verified","verifiedRaw","verifiedFrom","savedHighScore"}
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store", "source", "live", "goal", "tz", "time-zone", "now"], flags: ["json"])
        try args.expectPositionals(0, "")
        let storePath = try args.required("store")
        let goal = try args.integer("goal", default: StepRepository.defaultGoal, in: 1...10_000_000)
        let live: Int? = try args.value("live").map { _ in try args.integer("live", default: 0, in: 0...10_000_000) }
        let zone = try timeZone(args, warn: { StepSyncTool.err.line("stepsync today: warning: \($0)") })
        var now = Date()
        if let text = args.value("now") {
            guard let ms = ISO8601.parse(text) else { throw Arguments.UsageError("--now must be an ISO 8601 time like 2026-11-21T18:30:00Z, found '\(text)'") }
            now = Milliseconds.date(ms)
        }
        // The mock ends at the start of a day; here its default end is tomorrow,
        // so today's samples so far exist.
        let spec = try args.value("source").map { try SourceSpec.parse($0, today: MockConfiguration.today(now) + 1) }
        if let spec { try SourceFactory.check(spec) }
        // The store first: a locked or damaged one is said before an export is read.
        let store = try StepLogStore.open(storePath)
        defer { try? store.close() }
        let provider = try spec.map { try SourceFactory.provider(for: $0, progress: ProgressLine()) }
        let fixedNow = now
        let repository = StepRepository(store: store, goal: goal, clock: FixedClock(fixedNow), timeZone: { zone })
        let saved = repository.today.steps
        if let live { try repository.update(pedometer: live) }
        let verifiedFrom: String
        let verified: Int, verifiedRaw: Int
        if let provider, let text = args.value("source") {
            (verified, verifiedRaw) = try await MergedToday.steps(from: provider, now: now, timeZone: zone)
            verifiedFrom = text
        } else {
            (verified, verifiedRaw) = MergedToday.steps(in: try storedSamples(store), now: now, timeZone: zone)
            verifiedFrom = "store"
        }
        let today = try repository.update(verified: verified)
        try store.close()
        if args.has("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("date", today.date)
            w.field("timeZone", zone.identifier)
            w.field("steps", today.steps)
            w.field("goal", today.goal)
            w.field("goalReached", today.goalReached)
            w.key("progress"); w.value(today.progress)
            w.field("stepsRemaining", today.stepsRemaining)
            w.key("pedometer"); if let live { w.value(live) } else { w.null() }
            w.field("verified", verified)
            w.field("verifiedRaw", verifiedRaw)
            w.field("verifiedFrom", verifiedFrom)
            w.field("savedHighScore", saved)
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("\(today.date) (\(zone.identifier)): \(Format.count(today.steps)) steps of \(Format.count(today.goal)) (\(Format.percent(today.progress))), "
                     + (today.goalReached ? "goal reached" : "\(Format.count(today.stepsRemaining)) to go"))
            let origin = verifiedFrom == "store" ? "the store's samples (as of the last ingest)" : verifiedFrom
            out.line("  pedometer \(live.map { Format.count($0) } ?? "- (no --live reading)"), verified from \(origin) \(Format.count(verified)) (raw sum \(Format.count(verifiedRaw))), saved high score \(Format.count(saved))")
        }
        return 0
    }

    /// `--tz`, or its old name `--time-zone` with a warning.
    static func timeZone(_ args: Arguments, warn: (String) -> Void) throws -> TimeZone {
        var option = "tz"
        if args.value("time-zone") != nil {
            guard args.value("tz") == nil else { throw Arguments.UsageError("--tz and --time-zone (its old name) cannot go together") }
            warn("--time-zone is now --tz, as in stepsync daily; the old name goes away in the next release")
            option = "time-zone"
        }
        guard let name = args.value(option) else { return TimeZone.current }
        guard let zone = TimeZone(identifier: name) else { throw Arguments.UsageError("--\(option): unknown time zone '\(name)'") }
        return zone
    }

    /// The store's samples for today's total: in a store that also holds
    /// real samples, without the mock's.
    static func storedSamples(_ store: StepLogStore) throws -> SampleTable {
        var table = try SampleTable(store: store)
        if table.sources.contains(where: { $0.bundleId != StoreSourceKinds.mockBundleId }) {
            table.removeAll { _, source in source.bundleId == StoreSourceKinds.mockBundleId }
        }
        return table
    }
}

/// One instant, for a command that runs once.
struct FixedClock: TodayClock {
    let instant: Date
    init(_ instant: Date) { self.instant = instant }
    func now() -> Date { instant }
}
