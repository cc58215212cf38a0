import Foundation

/// The merge of docs/TOTALS.md §4 in one sweep over the samples sorted by
/// start: time is cut at every sample start and end and every day start;
/// between two cuts the highest-ranked source with an active sample wins, and
/// each of its active samples adds `F(next) − F(now)`. Active samples sit in a
/// heap by end; which ranks are active is a bit set, so the winner is its
/// lowest set bit. O(n log a) for n samples with at most a active at once.
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

    /// F(t): the steps a sample spreading `count` evenly over [start, end) has
    /// completed by `t`, floor(count × (t − start) / (end − start)), exact.
    @inline(__always)
    public static func completed(_ count: UInt32, start: Int64, end: Int64, at t: Int64) -> Int64 {
        let elapsed = t - start, length = end - start
        if elapsed >= length { return Int64(count) }
        if elapsed <= 0 { return 0 }
        if elapsed < 1 << 31 { return Int64(count) * elapsed / length } // < 2^63
        let product = Int64(count).multipliedFullWidth(by: elapsed)
        return length.dividingFullWidth(product).quotient
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
                raw[day * n + slot] += Int64(x.count)
                continue
            }
            var k = day
            var before = completed(x.count, start: x.start, end: x.end, at: from)
            while k < dayCount && bounds[k] < x.end {
                let after = completed(x.count, start: x.start, end: x.end, at: min(x.end, bounds[k + 1]))
                raw[k * n + slot] += after - before
                before = after
                k += 1
            }
        }
    }

    /// An active sample: everything its credit needs, so the sweep never
    /// goes back to the sample array.
    private struct Active {
        var end: Int64
        var start: Int64
        var count: UInt32
        var rank: UInt32
        /// F at `creditedUntil`: the next credit from there needs one division, not two.
        var creditedUntil: Int64
        var credited: Int64
    }

    /// The sweep: each segment's winner keeps its active samples' pieces.
    private static func addMerged(_ xs: UnsafeBufferPointer<SampleTable.Entry>, _ bounds: UnsafeBufferPointer<Int64>, _ n: Int,
                                  into merged: UnsafeMutableBufferPointer<Int64>) {
        guard let first = xs.first else { return }
        let dayCount = bounds.count - 1
        var heap = MinHeap()
        var activeOfRank = [Int32](repeating: 0, count: n)
        var ranks = RankSet(count: n)
        var t = min(first.start, bounds[0])
        var day = -1 // -1: before the range
        var i = 0
        while true {
            while day < dayCount && bounds[day + 1] <= t { day += 1 }
            if day == dayCount { return }
            // Samples ending at t no longer cover it; samples starting at t do.
            while let top = heap.top, top.end <= t {
                heap.pop()
                let rank = Int(top.rank)
                activeOfRank[rank] -= 1
                if activeOfRank[rank] == 0 { ranks.remove(rank) }
            }
            let firstStarting = i
            while i < xs.count && xs[i].start <= t {
                let x = xs[i]
                if x.start < x.end {
                    heap.push(Active(end: x.end, start: x.start, count: x.count, rank: x.source, creditedUntil: x.start, credited: 0))
                    let rank = Int(x.source)
                    if activeOfRank[rank] == 0 { ranks.insert(rank) }
                    activeOfRank[rank] += 1
                }
                i += 1
            }
            // Instantaneous samples at t count unless a higher source covers t.
            if day >= 0 {
                for j in firstStarting..<i where xs[j].start == xs[j].end {
                    let rank = Int(xs[j].source)
                    if ranks.lowest.map({ $0 >= rank }) ?? true { merged[day * n + rank] += Int64(xs[j].count) }
                }
            }
            if heap.isEmpty && i == xs.count { return }
            let next = min(i < xs.count ? xs[i].start : .max, heap.top?.end ?? .max, bounds[day + 1])
            if day >= 0, let winner = ranks.lowest {
                merged[day * n + winner] += heap.credit(rank: UInt32(winner), from: t, to: next)
            }
            t = next
        }
    }

    /// A binary min-heap of active samples by end.
    private struct MinHeap {
        private(set) var items: [Active] = []

        var isEmpty: Bool { items.isEmpty }
        var top: Active? { items.first }

        mutating func push(_ a: Active) {
            items.append(a)
            var c = items.count - 1
            while c > 0 {
                let p = (c - 1) / 2
                guard items[c].end < items[p].end else { break }
                items.swapAt(c, p)
                c = p
            }
        }

        /// The steps the active samples of `rank` hold in [from, to).
        mutating func credit(rank: UInt32, from: Int64, to: Int64) -> Int64 {
            var gained: Int64 = 0
            for k in items.indices where items[k].rank == rank {
                let a = items[k]
                let before = a.creditedUntil == from ? a.credited : completed(a.count, start: a.start, end: a.end, at: from)
                let after = completed(a.count, start: a.start, end: a.end, at: to)
                gained += after - before
                items[k].creditedUntil = to
                items[k].credited = after
            }
            return gained
        }

        mutating func pop() {
            let last = items.removeLast()
            guard !items.isEmpty else { return }
            items[0] = last
            var p = 0
            while true {
                let l = 2 * p + 1, r = l + 1
                var m = p
                if l < items.count && items[l].end < items[m].end { m = l }
                if r < items.count && items[r].end < items[m].end { m = r }
                if m == p { return }
                items.swapAt(p, m)
                p = m
            }
        }
    }

    /// Which priority positions have an active sample.
    private struct RankSet {
        private var words: [UInt64]

        init(count: Int) { words = [UInt64](repeating: 0, count: max(1, (count + 63) / 64)) }

        mutating func insert(_ r: Int) { words[r >> 6] |= 1 << UInt64(r & 63) }
        mutating func remove(_ r: Int) { words[r >> 6] &= ~(1 << UInt64(r & 63)) }

        /// The highest-priority active position.
        var lowest: Int? {
            for (w, word) in words.enumerated() where word != 0 { return w << 6 | word.trailingZeroBitCount }
            return nil
        }
    }
}
