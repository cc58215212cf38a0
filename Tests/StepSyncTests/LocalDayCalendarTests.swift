import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// Local days as docs/TOTALS.md §3 defines them.
@Suite struct LocalDayCalendarTests {
    func hours(_ zone: String, _ date: String) -> Double {
        let c = LocalDayCalendar(identifier: zone)!
        let d = LocalDayCalendar.parse(date: date)!
        return Double(c.startMilliseconds(ofDay: d + 1) - c.startMilliseconds(ofDay: d)) / 3_600_000
    }

    @Test func daysAreTwentyThreeOrTwentyFiveHoursWhenClocksChange() {
        #expect(hours("America/New_York", "2026-03-08") == 23)
        #expect(hours("America/New_York", "2026-11-01") == 25)
        #expect(hours("Europe/Paris", "2026-03-29") == 23)
        #expect(hours("Europe/Paris", "2026-10-25") == 25)
        #expect(hours("Europe/Paris", "2026-10-26") == 24)
        #expect(hours("Australia/Lord_Howe", "2026-10-04") == 23.5)  // a half-hour change
        #expect(hours("America/Santiago", "2026-04-04") == 25)       // back from 24:00 to 23:00: still the 4th
        #expect(hours("America/Sao_Paulo", "2018-11-04") == 23)      // midnight skipped: the day starts at 01:00
        #expect(hours("Pacific/Apia", "2011-12-30") == 0)            // a date Samoa skipped
        #expect(hours("UTC", "2024-02-29") == 24)
        let paris = LocalDayCalendar(identifier: "Europe/Paris")!
        #expect(paris.startMilliseconds(ofDay: LocalDayCalendar.parse(date: "2026-10-25")!) == ISO8601.parse("2026-10-24T22:00:00Z")!)
        #expect(paris.startMilliseconds(ofDay: LocalDayCalendar.parse(date: "2026-10-26")!) == ISO8601.parse("2026-10-25T23:00:00Z")!)
        let saoPaulo = LocalDayCalendar(identifier: "America/Sao_Paulo")!
        #expect(saoPaulo.startMilliseconds(ofDay: LocalDayCalendar.parse(date: "2018-11-04")!) == ISO8601.parse("2018-11-04T03:00:00Z")!)
    }

    /// The quick path (midnight under the offset in effect) against the
    /// definition itself (the least second whose local date is the day),
    /// over many zones and days.
    @Test func theQuickPathAgreesWithTheDefinition() {
        var rng = SplitMix64(seed: 3)
        let zones = ["America/New_York", "Europe/Paris", "America/Santiago", "America/Sao_Paulo", "Australia/Lord_Howe", "Asia/Tehran",
                     "Pacific/Apia", "America/Havana", "Asia/Gaza", "Africa/Casablanca", "Pacific/Kiritimati", "America/St_Johns", "UTC"]
        for zone in zones {
            let c = LocalDayCalendar(identifier: zone)!
            for _ in 0..<300 {
                let day = Int64(rng.next(in: 0...25_000))
                var lo = day * 86_400 - 26 * 3600, hi = day * 86_400 + 26 * 3600
                while lo < hi {
                    let mid = lo + (hi - lo) / 2
                    if c.localDay(atSecond: mid) >= day { hi = mid } else { lo = mid + 1 }
                }
                #expect(c.startMilliseconds(ofDay: day) == lo * 1000, "\(zone) \(LocalDayCalendar.format(day: day))")
            }
        }
    }

    @Test func datesParseOnlyWhenTheyExist() {
        #expect(LocalDayCalendar.parse(date: "1970-01-01") == 0)
        #expect(LocalDayCalendar.parse(date: "2024-02-29") == 19_782)
        for bad in ["2026-02-29", "2026-13-01", "2026-00-10", "2026-1-01", "26-01-01", "2026-01-01T00:00", "0000-01-01", "2026/01/01"] {
            #expect(LocalDayCalendar.parse(date: bad) == nil, "\(bad)")
        }
        #expect(LocalDayCalendar.format(day: 19_782) == "2024-02-29")
    }
}
