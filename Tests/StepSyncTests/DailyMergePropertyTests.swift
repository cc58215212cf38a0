import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Seeded random cases for the merge (docs/TOTALS.md §4): the sweep equals the
/// definition transcribed plainly, and the guarantees of "Rounding" hold.
@Suite struct DailyMergePropertyTests {
    static let zones = ["UTC", "America/New_York", "Europe/Paris", "Asia/Tokyo", "Australia/Lord_Howe", "America/Santiago",
                        "Asia/Kolkata", "Pacific/Chatham"]
    /// Pattern list for the cases: Watch, iPhone, Pedometer++, then anything else.
    static let priority = try! SourcePriority(patterns: ["Apple Watch", "iPhone", "Pedometer"])
    static let pool = [StepSource(bundleId: "Simon\u{2019}s Apple\u{00A0}Watch", deviceName: "Apple Watch"),
                       StepSource(bundleId: "Simon\u{2019}s iPhone", deviceName: "iPhone"),
                       StepSource(bundleId: "Pedometer++", deviceName: "iPhone")]
    static let lowest = StepSource(bundleId: "Zzz Steps", deviceName: nil)

    struct Case {
        var calendar: LocalDayCalendar
        var days: ClosedRange<Int64>
        var samples: [StepSample]
    }

    /// A few days around a DST change (when the zone has one) with samples
    /// from `sources`: overlapping, instantaneous, crossing midnight, long.
    static func randomCase(_ rng: inout SplitMix64, sources: [StepSource], samples n: Int) -> Case {
        let zone = zones[rng.next(in: 0...(zones.count - 1))]
        let calendar = LocalDayCalendar(identifier: zone)!
        let anchors: [Int64] = [20_520, 20_710, 20_885, 20_000 + Int64(rng.next(in: 0...900))] // 2026-03-08, 2026-09-13, 2027-03-07, any
        let first = anchors[rng.next(in: 0...(anchors.count - 1))] - Int64(rng.next(in: 0...2))
        let days = first...(first + Int64(rng.next(in: 0...4)))
        let from = calendar.startMilliseconds(ofDay: days.lowerBound) - 6 * 3_600_000
        let to = calendar.startMilliseconds(ofDay: days.upperBound + 1) + 6 * 3_600_000
        var samples: [StepSample] = []
        for i in 0..<n {
            var start = Int64(rng.next(in: 0...Int(to - from))) + from
            if rng.next(in: 0...2) > 0 { start -= start % 60_000 } // many on whole minutes: shared boundaries
            let duration: Int64
            switch rng.next(in: 0...19) {
            case 0...1: duration = 0
            case 2: duration = Int64(rng.next(in: 1...30 * 3600)) * 1000
            case 3: duration = Int64(rng.next(in: 1...999))
            default: duration = Int64(rng.next(in: 1...180)) * 60_000
            }
            let source = sources[rng.next(in: 0...(sources.count - 1))]
            // A third of the counts have a fraction (thousandths), as an older export's values do.
            let whole = rng.next(in: 0...9) == 0 ? 0 : rng.next(in: 1...6_000)
            let fraction = rng.next(in: 0...2) == 0 ? rng.next(in: 1...999) : 0
            samples.append(StepSample(id: DerivedUUID.make(99, UInt64(i), UInt64(n)), startMilliseconds: start, endMilliseconds: start + duration,
                                      countThousandths: Int64(whole) * 1000 + Int64(fraction),
                                      sourceBundleId: source.bundleId, sourceDeviceName: source.deviceName))
        }
        return Case(calendar: calendar, days: days, samples: samples)
    }

    static func merge(_ c: Case, _ samples: [StepSample]? = nil) -> DailyTotals {
        DailyMerge.totals(SampleTable(samples ?? c.samples), priority: priority, calendar: c.calendar, days: c.days)
    }

    @Test func theSweepEqualsTheDefinition() {
        var rng = SplitMix64(seed: 14)
        for _ in 0..<400 {
            let c = Self.randomCase(&rng, sources: Self.pool + [Self.lowest], samples: rng.next(in: 1...40))
            let totals = Self.merge(c)
            let naive = NaiveDailyTotals.rows(c.samples, priority: Self.priority, calendar: c.calendar, days: c.days)
            #expect(totals.sources == naive.sources)
            for i in 0..<totals.dayCount {
                let n = totals.sources.count
                let merged = (0..<n).map { totals.mergedBySource[i * n + $0] }
                let raw = (0..<n).map { totals.rawBySource[i * n + $0] }
                #expect(merged == naive.rows[i].merged && raw == naive.rows[i].raw,
                        "\(c.calendar.identifier) day \(LocalDayCalendar.format(day: c.days.lowerBound + Int64(i)))")
            }
        }
    }

    @Test func mergedNeverExceedsRawAndASampleSplitsIntoExactlyItsCount() {
        var rng = SplitMix64(seed: 15)
        for _ in 0..<200 {
            var c = Self.randomCase(&rng, sources: Self.pool, samples: rng.next(in: 1...2_000))
            // A range that holds every sample whole.
            let table = SampleTable(c.samples)
            c.days = table.dayRange(in: c.calendar)!
            let totals = Self.merge(c)
            let n = totals.sources.count
            for (i, d) in totals.days.enumerated() {
                #expect(d.merged <= d.raw)
                for s in d.sources { #expect(s.merged <= s.raw && s.merged >= 0) }
                // Whole steps within half a step of the day's thousandths.
                let thousandths = (0..<n).reduce(Int64(0)) { $0 + totals.rawBySource[i * n + $1] }
                #expect(abs(d.raw * 1000 - thousandths) <= 500)
            }
            #expect(totals.rawBySource.reduce(0, +) == c.samples.reduce(0) { $0 + $1.countThousandths })
            // The order samples arrive in changes nothing.
            var shuffled = c.samples
            shuffled.shuffle(using: &rng)
            #expect(Self.merge(c, shuffled).days == totals.days)
        }
    }

    @Test func aSingleSourceGivesMergedEqualToRaw() {
        var rng = SplitMix64(seed: 16)
        for _ in 0..<200 {
            let source = Self.pool[rng.next(in: 0...(Self.pool.count - 1))]
            let c = Self.randomCase(&rng, sources: [source], samples: rng.next(in: 1...1_000))
            for d in Self.merge(c).days { #expect(d.merged == d.raw) }
        }
    }

    @Test func aLowerSourceOnlyFillsTheGapsOfTheOthers() {
        var rng = SplitMix64(seed: 17)
        for _ in 0..<200 {
            let existing = Array(Self.pool.shuffled(using: &rng).prefix(rng.next(in: 1...3)))
            var c = Self.randomCase(&rng, sources: existing, samples: rng.next(in: 1...600))
            let before = Self.merge(c)
            let more = Self.randomCase(&rng, sources: [Self.lowest], samples: rng.next(in: 1...300)).samples.map { s -> StepSample in
                // Lay the new source's samples over the same days.
                var s = s
                let shift = c.calendar.startMilliseconds(ofDay: c.days.lowerBound) - s.startMilliseconds + Int64(rng.next(in: 0...(Int(c.days.count) * 86_400_000)))
                s.startMilliseconds += shift
                s.endMilliseconds += shift
                return s
            }
            let after = Self.merge(c, c.samples + more)
            let top = before.sources[0]
            // What each other source holds in the top source's gaps: merged with the top alone, minus the top's own.
            let others = Set(c.samples.map(StepSource.init(of:)) + [Self.lowest]).subtracting([top])
            var inGaps = [Int64](repeating: 0, count: before.dayCount)
            for other in others {
                let pair = (c.samples + more).filter { StepSource(of: $0) == top || StepSource(of: $0) == other }
                for (i, d) in Self.merge(c, pair).days.enumerated() {
                    let topRaw = d.sources.first { $0.source == top }?.raw ?? 0
                    inGaps[i] += d.merged - topRaw
                }
            }
            for i in 0..<before.dayCount {
                let (b, a) = (before.day(i), after.day(i))
                #expect(a.merged >= b.merged, "adding a lower source never lowers a day")
                let topRaw = a.sources.first { $0.source == top }?.raw ?? 0
                #expect(a.merged <= topRaw + inGaps[i], "never above the top source plus what the others add in its gaps")
                // The sources that were there keep exactly what they had.
                for s in b.sources { #expect(a.sources.first { $0.source == s.source } == s) }
            }
            c.samples += more
        }
    }

    /// Runs of days swept on their own threads give the numbers of one sweep:
    /// samples crossing a run's first boundary, long ones, instants at it.
    @Test func splittingTheDaysAcrossThreadsChangesNothing() {
        var rng = SplitMix64(seed: 18)
        for _ in 0..<30 {
            var c = Self.randomCase(&rng, sources: Self.pool + [Self.lowest], samples: rng.next(in: 2_000...8_000))
            // Spread the samples over about 200 days.
            let spread = c.samples.map { s -> StepSample in
                var s = s
                let shift = Int64(rng.next(in: 0...200)) * 86_400_000 + Int64(rng.next(in: 0...1)) * 3_600_000
                s.startMilliseconds += shift
                s.endMilliseconds += shift
                return s
            }
            c.samples = spread
            c.days = SampleTable(spread).dayRange(in: c.calendar)!
            let one = DailyMerge.totals(SampleTable(spread), priority: Self.priority, calendar: c.calendar, days: c.days, threads: 1)
            for threads in [2, 3, 7] {
                let many = DailyMerge.totals(SampleTable(spread), priority: Self.priority, calendar: c.calendar, days: c.days, threads: threads)
                #expect(many.days == one.days, "\(threads) threads, \(c.calendar.identifier)")
            }
        }
    }

    @Test func completedStepsAreExactEvenWhere64BitsOverflow() {
        // 4,294,967,295.999 steps over 100 days, at 99 days: the product needs 128 bits.
        let count = UInt64(UInt32.max), length: Int64 = 100 * 86_400_000
        let thousandths = count * 1000 + 999
        #expect(DailyMerge.completed(thousandths, start: 0, end: length, at: 99 * 86_400_000)
                == Int64(count) * 99 / 100 * 1000 + 999 * 99 / 100)
        #expect(DailyMerge.completed(thousandths, start: 5, end: 5 + length, at: 5 + length) == Int64(thousandths))
        #expect(DailyMerge.completed(600_000, start: 0, end: 600_000, at: 300_000) == 300_000)
        #expect(DailyMerge.completed(100_000, start: 0, end: 420_000, at: 120_000) == 28_000) // floor(28.57) whole steps
        // A fraction: floor(w × p) steps and floor(f × p) thousandths, so whole counts keep their totals.
        #expect(DailyMerge.completed(100_700, start: 0, end: 420_000, at: 120_000) == 28_000 + 200) // 0.7 × 2/7 = 0.2
        #expect(DailyMerge.completed(1_500, start: 0, end: 3, at: 1) == 0 + 166)
    }
}
