/// Per-day merged and raw totals over a range of local days, per source
/// (docs/TOTALS.md): what `DailyMerge` computes and `stepsync daily` prints.
public struct DailyTotals: Sendable {
    public let timeZone: String
    public let priority: SourcePriority
    /// Every source of the input, in priority order (highest first).
    public let sources: [StepSource]
    /// The first day (days since 1970), and how many; no days for an empty range.
    public let firstDay: Int64
    public let dayCount: Int
    /// `start(D)` of each day and of the day after the last (dayCount + 1
    /// values; none when there are no days).
    public let boundaries: [Int64]
    /// Day-major tables in thousandths of a step: [day * sources.count + position in `sources`].
    let mergedBySource: [Int64]
    let rawBySource: [Int64]

    init(timeZone: String, priority: SourcePriority, sources: [StepSource], firstDay: Int64, dayCount: Int,
         boundaries: [Int64], mergedBySource: [Int64], rawBySource: [Int64]) {
        self.timeZone = timeZone
        self.priority = priority
        self.sources = sources
        self.firstDay = firstDay
        self.dayCount = dayCount
        self.boundaries = boundaries
        self.mergedBySource = mergedBySource
        self.rawBySource = rawBySource
    }

    /// The `i`th day's row.
    public func day(_ i: Int) -> DayTotal {
        let n = sources.count
        var merged: Int64 = 0, raw: Int64 = 0
        var shares: [DayTotal.Source] = []
        for p in 0..<n {
            let m = mergedBySource[i * n + p], r = rawBySource[i * n + p]
            merged += m
            raw += r
            if r > 0 { shares.append(DayTotal.Source(source: sources[p], merged: Self.steps(m), raw: Self.steps(r))) }
        }
        return DayTotal(day: firstDay + Int64(i), merged: Self.steps(merged), raw: Self.steps(raw),
                        milliseconds: boundaries[i + 1] - boundaries[i], sources: shares)
    }

    /// Whole steps from thousandths, rounded half to even (docs/TOTALS.md §4):
    /// a day's total is within half a step of its thousandths; a whole count's exact.
    public static func steps(_ thousandths: Int64) -> Int64 {
        let (q, r) = (thousandths / 1000, thousandths % 1000) // thousandths ≥ 0
        return r > 500 || (r == 500 && q % 2 == 1) ? q + 1 : q
    }

    /// Every day's row, in order.
    public var days: [DayTotal] { (0..<dayCount).map(day) }

    /// The sources with raw > 0 on some day of the range, in priority order.
    public var sourcesWithSteps: [StepSource] {
        let n = sources.count
        return (0..<n).filter { p in (0..<dayCount).contains { rawBySource[$0 * n + p] > 0 } }.map { sources[$0] }
    }
}
