/// ISO 8601 timestamps in UTC with `Z`, as the API and the seeds' JSONL use
/// them ("2024-01-15T10:30:00Z"; milliseconds only when not zero). Written by
/// hand with days-from-civil arithmetic: an upload formats two dates per
/// sample, and DateFormatter costs microseconds each.
///
/// Every `Int64` of milliseconds formats to its own text: years 0…9999 with
/// four digits (RFC 3339), other years in ISO 8601's expanded form, a sign
/// and at least six digits ("+010000-01-01T00:00:00Z", "-000001-…"), as
/// JavaScript's `toISOString` writes them. The sample contract keeps stored
/// and uploaded samples within 2000…(now + 24 h), so the API only ever sees
/// the four-digit form.
public enum ISO8601 {
    /// Formats milliseconds since 1970 UTC.
    public static func format(milliseconds: Int64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(milliseconds: milliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends the formatted timestamp's UTF-8 bytes.
    public static func append(milliseconds: Int64, to out: inout [UInt8]) {
        let (seconds, millis) = floorDivide(milliseconds, 1000)
        let (days, secondOfDay) = floorDivide(seconds, 86_400)
        let (year, month, day) = civil(fromDays: days)
        appendYear(year, &out); out.append(0x2D)
        digits(Int64(month), 2, &out); out.append(0x2D)
        digits(Int64(day), 2, &out); out.append(0x54)
        digits(secondOfDay / 3600, 2, &out); out.append(0x3A)
        digits(secondOfDay / 60 % 60, 2, &out); out.append(0x3A)
        digits(secondOfDay % 60, 2, &out)
        if millis != 0 { out.append(0x2E); digits(millis, 3, &out) }
        out.append(0x5A)
    }

    /// Parses what `format` writes (and any "yyyy-MM-ddTHH:mm:ss[.fff](Z|±HH:MM)",
    /// a space for the `T`, an expanded year); nil for anything else or a
    /// value beyond `Int64` milliseconds.
    public static func parse(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= b.count else { return nil }
            var v: Int64 = 0
            for i in from..<from + count {
                guard b[i] >= 0x30 && b[i] <= 0x39 else { return nil }
                v = v * 10 + Int64(b[i] - 0x30)
            }
            return v
        }
        // The year: four digits, or a sign and six to nine (Int64 milliseconds span ±292 million years).
        var p = 0
        var year: Int64
        if let first = b.first, first == 0x2B || first == 0x2D {
            var end = 1
            while end < b.count, b[end] >= 0x30, b[end] <= 0x39 { end += 1 }
            guard end - 1 >= 6, end - 1 <= 9, let magnitude = number(1, end - 1) else { return nil }
            year = first == 0x2D ? -magnitude : magnitude
            p = end
        } else {
            guard let y = number(0, 4) else { return nil }
            year = y
            p = 4
        }
        guard b.count >= p + 16, b[p] == 0x2D, b[p + 3] == 0x2D, b[p + 6] == 0x54 || b[p + 6] == 0x20,
              b[p + 9] == 0x3A, b[p + 12] == 0x3A,
              let mo = number(p + 1, 2), let d = number(p + 4, 2),
              let h = number(p + 7, 2), let mi = number(p + 10, 2), let s = number(p + 13, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = p + 15
        var millis: Int64 = 0
        if i < b.count, b[i] == 0x2E {
            i += 1
            var scale: Int64 = 100
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                millis += Int64(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
        }
        var offset: Int64 = 0
        guard i < b.count else { return nil }
        if b[i] == 0x5A {
            i += 1
        } else if b[i] == 0x2B || b[i] == 0x2D {
            guard let oh = number(i + 1, 2) else { return nil }
            let colon = i + 3 < b.count && b[i + 3] == 0x3A ? 1 : 0
            guard let om = number(i + 3 + colon, 2) else { return nil }
            offset = (oh * 60 + om) * 60 * (b[i] == 0x2D ? -1 : 1)
            i += 5 + colon
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: mo, day: d)
        // Checked arithmetic: an expanded year can name an instant beyond Int64 milliseconds.
        let (daySeconds, o1) = days.multipliedReportingOverflow(by: 86_400)
        let (seconds, o2) = daySeconds.addingReportingOverflow(h * 3600 + mi * 60 + s - offset)
        // seconds·1000 + millis; below zero formed as (seconds + 1)·1000 −
        // (1000 − millis), so that Int64.min (whose seconds·1000 alone is out
        // of range) parses too.
        let shift: Int64 = seconds < 0 && millis > 0 ? 1 : 0
        let (whole, o3) = (seconds + shift).multipliedReportingOverflow(by: 1000)
        let (result, o4) = whole.addingReportingOverflow(millis - shift * 1000)
        return o1 || o2 || o3 || o4 ? nil : result
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    public static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date of a day number (inverse of `daysFromCivil`).
    public static func civil(fromDays z0: Int64) -> (year: Int64, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = Int(doy - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Floor division with a non-negative remainder.
    @inline(__always)
    public static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b, r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    /// Days in `month` (1…12) of a proleptic Gregorian `year`.
    public static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// A non-negative `value` in exactly `width` digits.
    private static func digits(_ value: Int64, _ width: Int, _ out: inout [UInt8]) {
        var v = value
        var tmp = [UInt8](repeating: 0x30, count: width)
        var i = width - 1
        while i >= 0 { tmp[i] = UInt8(0x30 + v % 10); v /= 10; i -= 1 }
        out.append(contentsOf: tmp)
    }

    /// Four digits for 0…9999; otherwise a sign and at least six digits.
    private static func appendYear(_ year: Int64, _ out: inout [UInt8]) {
        if year >= 0 && year <= 9999 { return digits(year, 4, &out) }
        out.append(year < 0 ? 0x2D : 0x2B)
        var magnitude = year.magnitude
        var reversed: [UInt8] = []
        repeat {
            reversed.append(UInt8(0x30 + magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        while reversed.count < 6 { reversed.append(0x30) }
        out.append(contentsOf: reversed.reversed())
    }
}
