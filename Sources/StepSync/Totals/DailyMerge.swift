import Foundation

/// The merge of docs/TOTALS.md §4 over the samples sorted by start: rank by
/// rank, highest first, each sample keeps the gaps the higher ranks leave of
/// it (their union, grown after each rank), credited per day as
/// `F(b) − F(a)` for each kept piece [a, b); instants count unless covered.
/// One linear pass per rank, a sort when the samples come out of order.
public enum DailyMerge {
    /// Totals for `days` (local day numbers) in `calendar`'s zone; no days
    /// when `days` is nil (an empty store without a range).
    /// The table is consumed: its entries are filtered and sorted in place.
    /// With `threads` > 1, runs of days are swept at once (each from the
    /// samples that reach into it), which gives the same numbers.
    public static func totals(_ table: consuming SampleTable, priority: SourcePriority, calendar: LocalDayCalendar,
                              days: ClosedRange<Int64>?,
                              threads: Int = min(4, ProcessInfo.processInfo.activeProcessorCount)) -> DailyTotals {
        let ordered = priority.ordered(table.sources)
        guard let days else {
            return DailyTotals(timeZone: calendar.identifier, priority: priority, sources: ordered, firstDay: 0, dayCount: 0,
                               boundaries: [], mergedBySource: [], rawBySource: [])
        }
        var positionOf: [StepSource: UInt32] = [:]
        for (p, s) in ordered.enumerated() { positionOf[s] = UInt32(p) }
        let position = table.sources.map { positionOf[$0]! }
        let boundaries = calendar.boundaries(days)
        let dayCount = boundaries.count - 1
        let n = ordered.count
        var merged = [Int64](repeating: 0, count: dayCount * n)
        var raw = [Int64](repeating: 0, count: dayCount * n)

        // The samples that touch the range, by priority position, sorted by
        // start: in place, in the table's own storage.
        let rangeStart = boundaries[0], rangeEnd = boundaries[dayCount]
        var xs = table.takeEntries()
        var kept = 0
        var sorted = true
        var longest: Int64 = 0
        for r in xs.indices {
            var e = xs[r]
            let inside = e.start < e.end ? (e.end > rangeStart && e.start < rangeEnd) : (e.start >= rangeStart && e.start < rangeEnd)
            guard inside else { continue }
            if kept > 0 && xs[kept - 1].start > e.start { sorted = false }
            longest = max(longest, e.end - e.start)
            e.source = position[Int(e.source)]
            xs[kept] = e
            kept += 1
        }
        xs.removeLast(xs.count - kept)
        if !sorted { xs.sort { $0.start < $1.start } }

        xs.withUnsafeBufferPointer { xs in
            boundaries.withUnsafeBufferPointer { bounds in
                merged.withUnsafeMutableBufferPointer { merged in
                    raw.withUnsafeMutableBufferPointer { raw in
                        let runs = DayRun.split(xs, bounds, n, longest: longest, parts: min(max(1, threads), max(1, dayCount / 32)),
                                                merged: merged, raw: raw)
                        if runs.count == 1 {
                            runs[0].sweep()
                        } else {
                            DispatchQueue.concurrentPerform(iterations: runs.count) { runs[$0].sweep() }
                        }
                    }
                }
            }
        }
        return DailyTotals(timeZone: calendar.identifier, priority: priority, sources: ordered,
                           firstDay: days.lowerBound, dayCount: dayCount, boundaries: boundaries,
                           mergedBySource: merged, rawBySource: raw)
    }

    /// F(t), in thousandths: what a sample spreading its count `w + f/1000`
    /// (w whole steps, f thousandths) evenly over [start, end) has completed by
    /// `t`, floor(w × p) steps and floor(f × p) thousandths with
    /// p = (t − start) / (end − start), exact (docs/TOTALS.md §4). A whole
    /// count's F is 1000 × the whole-step rule's.
    @inline(__always)
    public static func completed(_ thousandths: UInt64, start: Int64, end: Int64, at t: Int64) -> Int64 {
        let elapsed = t - start, length = end - start
        if elapsed >= length { return Int64(thousandths) }
        if elapsed <= 0 { return 0 }
        let fraction = Int64(thousandths % 1000)
        let whole = share(Int64(thousandths / 1000), elapsed, length) * 1000
        return fraction == 0 ? whole : whole + share(fraction, elapsed, length)
    }

    /// floor(n × elapsed / length) for 0 ≤ n < 2^42, 0 < elapsed < length, exact.
    @inline(__always)
    private static func share(_ n: Int64, _ elapsed: Int64, _ length: Int64) -> Int64 {
        if elapsed < 1 << 31 && n < 1 << 32 { return n * elapsed / length } // < 2^63
        return length.dividingFullWidth(n.multipliedFullWidth(by: elapsed)).quotient
    }

    /// A run of consecutive days and the samples that reach into it (sorted
    /// by start; some may end before it or start after it): one sweep, into
    /// the run's own rows of the output.
    private struct DayRun: @unchecked Sendable {
        var xs: UnsafeBufferPointer<SampleTable.Entry>
        var bounds: UnsafeBufferPointer<Int64>
        var n: Int
        var merged: UnsafeMutableBufferPointer<Int64>
        var raw: UnsafeMutableBufferPointer<Int64>

        func sweep() {
            addRaw(xs, bounds, n, into: raw)
            addMerged(xs, bounds, n, into: merged)
        }

        /// Up to `parts` runs holding about as many samples each.
        static func split(_ xs: UnsafeBufferPointer<SampleTable.Entry>, _ bounds: UnsafeBufferPointer<Int64>, _ n: Int, longest: Int64,
                          parts: Int, merged: UnsafeMutableBufferPointer<Int64>, raw: UnsafeMutableBufferPointer<Int64>) -> [DayRun] {
            let dayCount = bounds.count - 1
            // First sample index starting at or after t.
            func firstStarting(atOrAfter t: Int64) -> Int {
                var lo = 0, hi = xs.count
                while lo < hi { let mid = (lo + hi) / 2; if xs[mid].start < t { lo = mid + 1 } else { hi = mid } }
                return lo
            }
            // The day holding t (bounds ascend).
            func day(of t: Int64) -> Int {
                var lo = 0, hi = dayCount
                while lo + 1 < hi { let mid = (lo + hi) / 2; if bounds[mid] <= t { lo = mid } else { hi = mid } }
                return lo
            }
            var cuts = [0]
            if parts > 1 && !xs.isEmpty {
                for k in 1..<parts {
                    let d = day(of: xs[k * xs.count / parts].start)
                    if d > cuts.last! && d < dayCount { cuts.append(d) }
                }
            }
            cuts.append(dayCount)
            return zip(cuts, cuts.dropFirst()).map { a, b in
                let from = firstStarting(atOrAfter: bounds[a] - longest), to = firstStarting(atOrAfter: bounds[b])
                return DayRun(xs: UnsafeBufferPointer(rebasing: xs[from..<to]), bounds: UnsafeBufferPointer(rebasing: bounds[a...b]), n: n,
                              merged: UnsafeMutableBufferPointer(rebasing: merged[(a * n)..<(b * n)]),
                              raw: UnsafeMutableBufferPointer(rebasing: raw[(a * n)..<(b * n)]))
            }
        }
    }

    /// Every sample's pieces per day, by source.
    private static func addRaw(_ xs: UnsafeBufferPointer<SampleTable.Entry>, _ bounds: UnsafeBufferPointer<Int64>, _ n: Int,
                               into raw: UnsafeMutableBufferPointer<Int64>) {
        let dayCount = bounds.count - 1
        var day = 0
        for x in xs {
            // Samples before the days (a run's first ones) have nothing here.
            guard x.start == x.end ? x.start >= bounds[0] : x.end > bounds[0] else { continue }
            let from = max(x.start, bounds[0])
            while bounds[day + 1] <= from { day += 1 } // starts ascend: so does `day`
            let slot = Int(x.source)
            if x.start == x.end {
                raw[day * n + slot] += Int64(x.countThousandths)
                continue
            }
            var k = day
            var before = completed(x.countThousandths, start: x.start, end: x.end, at: from)
            while k < dayCount && bounds[k] < x.end {
                let after = completed(x.countThousandths, start: x.start, end: x.end, at: min(x.end, bounds[k + 1]))
                raw[k * n + slot] += after - before
                before = after
                k += 1
            }
        }
    }

    /// A stretch of time some higher-ranked source covers.
    private struct Covered {
        var start: Int64
        var end: Int64
    }

    /// Rank by rank, highest first: a sample keeps what the union of the
    /// higher ranks' samples leaves of it — exactly the instants where its
    /// source is the highest one covering them. The union is kept as sorted,
    /// disjoint intervals and grows by a merge after each rank; samples and
    /// union are both in start order, so each rank is one linear pass.
    private static func addMerged(_ xs: UnsafeBufferPointer<SampleTable.Entry>, _ bounds: UnsafeBufferPointer<Int64>, _ n: Int,
                                  into merged: UnsafeMutableBufferPointer<Int64>) {
        guard !xs.isEmpty else { return }
        let dayCount = bounds.count - 1
        // The samples' indices grouped by rank (a counting sort: start order within each rank).
        var firstOfRank = [Int](repeating: 0, count: n + 1)
        for x in xs { firstOfRank[Int(x.source) + 1] += 1 }
        for r in 0..<n { firstOfRank[r + 1] += firstOfRank[r] }
        var byRank = [Int32](repeating: 0, count: xs.count)
        var fill = firstOfRank
        for (i, x) in xs.enumerated() {
            byRank[fill[Int(x.source)]] = Int32(i)
            fill[Int(x.source)] += 1
        }
        let lastRank = (0..<n).last { firstOfRank[$0 + 1] > firstOfRank[$0] }!
        var cover: [Covered] = []
        var grown: [Covered] = []

        for rank in 0...lastRank where firstOfRank[rank + 1] > firstOfRank[rank] {
            let building = rank < lastRank
            grown.removeAll(keepingCapacity: true)
            var c = 0 // next interval of `cover` to merge into `grown`
            var j = 0 // first interval of `cover` that may still reach a sample
            var day = 0
            func extend(_ s: Int64, _ e: Int64) {
                if let last = grown.last, s <= last.end {
                    if e > last.end { grown[grown.count - 1].end = e }
                } else {
                    grown.append(Covered(start: s, end: e))
                }
            }
            for i in byRank[firstOfRank[rank]..<firstOfRank[rank + 1]] {
                let x = xs[Int(i)]
                while j < cover.count && cover[j].end <= x.start { j += 1 }
                let from = max(x.start, bounds[0])
                while bounds[day + 1] <= from && day < dayCount - 1 { day += 1 }
                if x.start == x.end {
                    // An instant: counted unless a higher rank covers it.
                    if x.start >= bounds[0] && !(j < cover.count && cover[j].start <= x.start) {
                        merged[day * n + rank] += Int64(x.countThousandths)
                    }
                    continue
                }
                if building {
                    while c < cover.count && cover[c].start <= x.start { extend(cover[c].start, cover[c].end); c += 1 }
                    extend(x.start, x.end)
                }
                if x.end <= bounds[0] { continue } // before the days: it only covers
                // The gaps the cover leaves in [start, end), each credited by day.
                var cursor = x.start
                var k = j
                while cursor < x.end {
                    let blocked = k < cover.count && cover[k].start < x.end
                    let gapEnd = blocked ? cover[k].start : x.end
                    if gapEnd > cursor {
                        credit(x, from: cursor, to: gapEnd, rank: rank, day: day, bounds, n, into: merged)
                    }
                    guard blocked else { break }
                    cursor = max(cursor, cover[k].end)
                    k += 1
                }
            }
            if building {
                while c < cover.count { extend(cover[c].start, cover[c].end); c += 1 }
                swap(&cover, &grown)
            }
        }
    }

    /// Adds a kept piece [a, b) of sample x to its days (from `day` on), clipped to the days.
    @inline(__always)
    private static func credit(_ x: SampleTable.Entry, from a: Int64, to b: Int64, rank: Int, day: Int,
                               _ bounds: UnsafeBufferPointer<Int64>, _ n: Int, into merged: UnsafeMutableBufferPointer<Int64>) {
        let dayCount = bounds.count - 1
        var a = max(a, bounds[0])
        let b = min(b, bounds[dayCount])
        guard a < b else { return }
        var d = day
        while bounds[d + 1] <= a { d += 1 }
        var before = completed(x.countThousandths, start: x.start, end: x.end, at: a)
        while a < b {
            let cut = min(b, bounds[d + 1])
            let after = completed(x.countThousandths, start: x.start, end: x.end, at: cut)
            merged[d * n + rank] += after - before
            before = after
            a = cut
            d += 1
        }
    }
}
