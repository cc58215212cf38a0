/// Parses the export's dates to the absolute instant in milliseconds since
/// 1970-01-01T00:00:00Z. Two forms, both local wall time and its UTC offset:
///
/// - `yyyy-MM-dd HH:mm:ss ±HHMM` (`2019-07-19 10:36:11 -0700`), every export
///   since iOS 9;
/// - `yyyyMMddHHmmss±HHMM` (`20151107171924+0100`), the compact form of the
///   iOS 8 exports (2014–2015), in records and in `ExportDate` alike.
///
/// Hand-written rather than `DateFormatter`: exact (no locale or calendar
/// settings involved), strict (every field range-checked, so a bad date makes
/// its record malformed instead of silently shifting), and allocation-free —
/// it runs three times per step record.
enum ExportDateParser {
    /// The exact length of a date: 19 characters of wall time, a space, 5 of offset.
    static let length = 25
    /// The exact length of an iOS 8 date: 14 digits of wall time, 5 of offset.
    static let compactLength = 19

    static func milliseconds(_ base: UnsafePointer<UInt8>, count: Int) -> Int64? {
        guard count == length else {
            return count == compactLength ? compactMilliseconds(base) : nil
        }
        guard base[4] == UInt8(ascii: "-"), base[7] == UInt8(ascii: "-"), base[10] == UInt8(ascii: " "),
              base[13] == UInt8(ascii: ":"), base[16] == UInt8(ascii: ":"), base[19] == UInt8(ascii: " "),
              let year = digits(base, 0, 4), let month = digits(base, 5, 2), let day = digits(base, 8, 2),
              let hour = digits(base, 11, 2), let minute = digits(base, 14, 2), let second = digits(base, 17, 2),
              let offsetHours = digits(base, 21, 2), let offsetMinutes = digits(base, 23, 2)
        else { return nil }
        return instant(year: year, month: month, day: day, hour: hour, minute: minute, second: second,
                       sign: base[20], offsetHours: offsetHours, offsetMinutes: offsetMinutes)
    }

    /// `yyyyMMddHHmmss±HHMM`.
    private static func compactMilliseconds(_ base: UnsafePointer<UInt8>) -> Int64? {
        guard let year = digits(base, 0, 4), let month = digits(base, 4, 2), let day = digits(base, 6, 2),
              let hour = digits(base, 8, 2), let minute = digits(base, 10, 2), let second = digits(base, 12, 2),
              let offsetHours = digits(base, 15, 2), let offsetMinutes = digits(base, 17, 2)
        else { return nil }
        return instant(year: year, month: month, day: day, hour: hour, minute: minute, second: second,
                       sign: base[14], offsetHours: offsetHours, offsetMinutes: offsetMinutes)
    }

    /// The instant of a wall time at a UTC offset, every field range-checked.
    private static func instant(year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64,
                                sign signByte: UInt8, offsetHours: Int64, offsetMinutes: Int64) -> Int64? {
        let sign: Int64
        switch signByte {
        case UInt8(ascii: "+"): sign = 1
        case UInt8(ascii: "-"): sign = -1
        default: return nil
        }
        guard (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 59, offsetHours <= 23, offsetMinutes <= 59
        else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let wallSeconds = days * 86_400 + hour * 3_600 + minute * 60 + second
        // Local wall time = UTC + offset, so UTC = wall time - offset.
        let offsetSeconds = sign * (offsetHours * 3_600 + offsetMinutes * 60)
        return (wallSeconds - offsetSeconds) * 1_000
    }

    static func milliseconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress else { return nil }
            return milliseconds(base, count: utf8.count)
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date. The year is shifted
    /// to start in March so the leap day is the last day of its year; 400-year
    /// eras of 146 097 days make the arithmetic exact for any year.
    static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400                                    // 0...399
        let shiftedMonth = month > 2 ? month - 3 : month + 9             // March = 0
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1           // 0...365
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468                        // 719 468 days from 0000-03-01 to 1970-01-01
    }

    static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        ISO8601.daysInMonth(year: year, month: month)
    }

    @inline(__always)
    private static func digits(_ base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int) -> Int64? {
        var value: Int64 = 0
        for i in offset..<(offset + count) {
            let d = base[i] &- UInt8(ascii: "0")
            guard d <= 9 else { return nil }
            value = value * 10 + Int64(d)
        }
        return value
    }
}
