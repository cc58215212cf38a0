import Foundation
import StepLog

/// Seed 004's verified total (B) as the Health app shows it: today's steps so
/// far with overlapping sources counted once (docs/TOTALS.md), from the
/// source's samples that start before `now` and overlap the current local day.
public enum MergedToday {
    /// How far before midnight a sample may start and still reach into today:
    /// the longest sample the API accepts (48 hours).
    public static let lookbackMilliseconds = SampleContract.maxDurationMilliseconds

    /// Today's merged and raw totals so far in `timeZone` at `now`.
    public static func steps(from provider: StepDataProvider, now: Date, timeZone: TimeZone,
                             priority: SourcePriority = .default) async throws -> (merged: Int, raw: Int) {
        let calendar = LocalDayCalendar(timeZone: timeZone)
        let nowMilliseconds = Milliseconds.from(now)
        let start = calendar.startMilliseconds(ofDay: calendar.localDay(ofMilliseconds: nowMilliseconds))
        let samples = try await provider.getRawStepSamples(for: DateInterval(start: Milliseconds.date(start - lookbackMilliseconds),
                                                                               end: Milliseconds.date(max(start, nowMilliseconds))))
        return steps(in: SampleTable(samples), now: now, timeZone: timeZone, priority: priority)
    }

    /// The same from samples at hand (a store's): those that start before
    /// `now` count, as far as they reach into the current local day.
    public static func steps(in table: SampleTable, now: Date, timeZone: TimeZone,
                             priority: SourcePriority = .default) -> (merged: Int, raw: Int) {
        let calendar = LocalDayCalendar(timeZone: timeZone)
        let nowMilliseconds = Milliseconds.from(now)
        let today = calendar.localDay(ofMilliseconds: nowMilliseconds)
        var table = table
        table.removeAll { entry, _ in entry.start >= nowMilliseconds }
        let row = DailyMerge.totals(table, priority: priority, calendar: calendar, days: today...today).day(0)
        return (Int(row.merged), Int(row.raw))
    }
}
