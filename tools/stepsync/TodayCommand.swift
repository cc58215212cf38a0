import Foundation
import StepLog
import StepSync
import ToolSupport

/// `stepsync today`: seed 004's ratchet from the command line.
enum TodayCommand {
    static let usage = """
        usage: stepsync today --store DIR [--source SOURCE] [--live N] [--goal N] [--time-zone TZ] [--now TIME] [--json]

        Today's steps that never go backwards: the maximum of the live reading (--live,
        the pedometer's count), the source's verified total for the current local day so
        far (overlapping sources counted once, as the Health app does: docs/TOTALS.md),
        and the high score saved in the store for that day. A new high score is saved
        (durably) for later runs. Prints steps, goal, progress and steps remaining.

        options:
          --store DIR       the StepLog store (created when missing)
          --source SOURCE   as for ingest; the mock here includes today's data so far
          --live N          a live pedometer reading for today
          --goal N          the daily goal (default 10,000)
          --time-zone TZ    the local time zone, e.g. Europe/Paris (default: the system's)
          --now TIME        the current time, ISO 8601 (default: now), e.g. to look at an export's day
          --json            {"date","steps","goal","goalReached","progress","stepsRemaining",
                            "pedometer","verified","verifiedRaw","savedHighScore",…}
        """

    static func run(_ arguments: [String]) async throws -> Int32 {
        if StepSyncTool.helpRequested(arguments, usage) { return 0 }
        let args = try Arguments(arguments, options: ["store", "source", "live", "goal", "time-zone", "now"], flags: ["json"])
        try args.expectPositionals(0, "")
        let storePath = try args.required("store")
        let goal = try args.integer("goal", default: StepRepository.defaultGoal, in: 1...10_000_000)
        let live: Int? = try args.value("live").map { _ in try args.integer("live", default: 0, in: 0...10_000_000) }
        var zone = TimeZone.current
        if let name = args.value("time-zone") {
            guard let z = TimeZone(identifier: name) else { throw Arguments.UsageError("--time-zone: unknown time zone '\(name)'") }
            zone = z
        }
        var now = Date()
        if let text = args.value("now") {
            guard let ms = ISO8601.parse(text) else { throw Arguments.UsageError("--now must be an ISO 8601 time like 2026-11-21T18:30:00Z, found '\(text)'") }
            now = Milliseconds.date(ms)
        }
        // The mock ends at the start of a day; here its default end is tomorrow,
        // so today's samples so far exist.
        let spec = try SourceSpec.parse(args.value("source") ?? "mock", today: MockConfiguration.today(now) + 1)
        let provider = try SourceFactory.provider(for: spec, progress: ProgressLine())
        let store = try StepLogStore.open(storePath)
        defer { try? store.close() }
        let fixedNow = now
        let repository = StepRepository(store: store, goal: goal, clock: FixedClock(fixedNow), timeZone: { zone })
        let saved = repository.today.steps
        if let live { try repository.update(pedometer: live) }
        let (verified, verifiedRaw) = try await MergedToday.steps(from: provider, now: now, timeZone: zone)
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
            w.field("savedHighScore", saved)
            w.endObject()
            StepSyncTool.out.line(w.string)
        } else {
            let out = StepSyncTool.out
            out.line("\(today.date) (\(zone.identifier)): \(Format.count(today.steps)) steps of \(Format.count(today.goal)) (\(Format.percent(today.progress))), "
                     + (today.goalReached ? "goal reached" : "\(Format.count(today.stepsRemaining)) to go"))
            out.line("  pedometer \(live.map { Format.count($0) } ?? "-"), verified \(Format.count(verified)) (raw sum \(Format.count(verifiedRaw))), saved high score \(Format.count(saved))")
        }
        return 0
    }
}

/// One instant, for a command that runs once.
struct FixedClock: TodayClock {
    let instant: Date
    init(_ instant: Date) { self.instant = instant }
    func now() -> Date { instant }
}
