/// One local calendar day of `DailyTotals`: the row of docs/TOTALS.md §5.
public struct DayTotal: Hashable, Sendable {
    /// One source's share of the day.
    public struct Source: Hashable, Sendable {
        public var source: StepSource
        /// What this source adds to the day's merged total.
        public var merged: Int64
        /// This source's own total: its samples' pieces in the day.
        public var raw: Int64
    }

    /// Days since 1970-01-01 (the local date).
    public var day: Int64
    /// The total the Health app would show: overlapping sources counted once.
    public var merged: Int64
    /// The plain sum of the samples' pieces in the day.
    public var raw: Int64
    /// The day's length in milliseconds (23 or 25 hours on DST days).
    public var milliseconds: Int64
    /// The sources with raw > 0 this day, in priority order.
    public var sources: [Source]

    /// "2026-03-08".
    public var date: String { LocalDayCalendar.format(day: day) }
}
