import Foundation

/// Local calendar days in an IANA time zone, as docs/TOTALS.md §3 defines
/// them: `localDate(t)` is the date of `t + offset(t)`, and day D is
/// `[start(D), start(D + 1))` with `start(D)` the least instant whose local
/// date is D or later. So a spring-forward day is 23 hours, a fall-back day
/// 25, a skipped midnight starts the day at the first instant that exists, and
/// a date the zone skipped is a day of no length. Days are numbered as days
/// since 1970-01-01 of the proleptic Gregorian calendar (`ISO8601.civil`).
public struct LocalDayCalendar: Sendable {
    public let timeZone: TimeZone
    /// The zone's name as given ("UTC" stays "UTC" whatever Foundation calls it).
    public let identifier: String

    public init(timeZone: TimeZone) {
        self.timeZone = timeZone
        identifier = timeZone.identifier
    }

    /// The zone for an IANA identifier ("Europe/Paris", "UTC"), or nil.
    public init?(identifier: String) {
        guard let zone = TimeZone(identifier: identifier) else { return nil }
        timeZone = zone
        self.identifier = identifier
    }

    /// The zone's UTC offset at a whole second since 1970.
    @inline(__always)
    func offsetSeconds(at second: Int64) -> Int64 {
        Int64(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(second))))
    }

    /// The local date (days since 1970) of a whole second.
    @inline(__always)
    func localDay(atSecond second: Int64) -> Int64 {
        ISO8601.floorDivide(second + offsetSeconds(at: second), 86_400).0
    }

    /// The local date of an instant in milliseconds (offsets change on whole seconds).
    public func localDay(ofMilliseconds ms: Int64) -> Int64 {
        localDay(atSecond: ISO8601.floorDivide(ms, 1000).0)
    }

    /// `start(day)` in milliseconds since 1970 UTC.
    public func startMilliseconds(ofDay day: Int64) -> Int64 {
        let midnight = day * 86_400
        // Usually local midnight: the offset in effect there, found in two steps.
        var guess = midnight - offsetSeconds(at: midnight)
        guess = midnight - offsetSeconds(at: guess)
        if localDay(atSecond: guess) >= day && localDay(atSecond: guess - 1) < day { return guess * 1000 }
        // Around a transition: the definition itself, by binary search
        // (offsets lie within ±26 hours).
        var lo = midnight - 26 * 3600, hi = midnight + 26 * 3600
        while lo < hi {
            let mid = lo + (hi - lo) / 2
            if localDay(atSecond: mid) >= day { hi = mid } else { lo = mid + 1 }
        }
        return lo * 1000
    }

    /// `start(day)` for `days.lowerBound ... days.upperBound + 1`: the
    /// boundaries of every day in the range, ascending.
    public func boundaries(_ days: ClosedRange<Int64>) -> [Int64] {
        (days.lowerBound...(days.upperBound + 1)).map { startMilliseconds(ofDay: $0) }
    }

    /// "2026-03-08" for a day number.
    public static func format(day: Int64) -> String {
        let (y, m, d) = ISO8601.civil(fromDays: day)
        return String(format: "%04lld-%02d-%02d", y, m, d)
    }

    /// The day number of "YYYY-MM-DD" (a real date, years 0001–9999), or nil.
    public static func parse(date text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count == 10, b[4] == 0x2D, b[7] == 0x2D else { return nil }
        func number(_ range: Range<Int>) -> Int64? {
            var v: Int64 = 0
            for i in range {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[i] - 0x30)
            }
            return v
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10), y >= 1, (1...12).contains(m), d >= 1 else { return nil }
        let day = ISO8601.daysFromCivil(year: y, month: m, day: d)
        let back = ISO8601.civil(fromDays: day)
        guard back.year == y, back.month == Int(m), back.day == Int(d) else { return nil } // 2026-02-30
        return day
    }
}
