/// ISO 8601 timestamps in UTC with `Z`, as the API and the seeds' JSONL use
/// them ("2024-01-15T10:30:00Z"; milliseconds only when not zero). Written by
/// hand with days-from-civil arithmetic: an upload formats two dates per
/// sample, and DateFormatter costs microseconds each.
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
        digits(year, 4, &out); out.append(0x2D)
        digits(Int64(month), 2, &out); out.append(0x2D)
        digits(Int64(day), 2, &out); out.append(0x54)
        digits(secondOfDay / 3600, 2, &out); out.append(0x3A)
        digits(secondOfDay / 60 % 60, 2, &out); out.append(0x3A)
        digits(secondOfDay % 60, 2, &out)
        if millis != 0 { out.append(0x2E); digits(millis, 3, &out) }
        out.append(0x5A)
    }

    /// Parses what `format` writes (and any "yyyy-MM-ddTHH:mm:ss[.fff](Z|±HH:MM)").
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
        guard b.count >= 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54 || b[10] == 0x20, b[13] == 0x3A, b[16] == 0x3A,
              let y = number(0, 4), let mo = number(5, 2), let d = number(8, 2),
              let h = number(11, 2), let mi = number(14, 2), let s = number(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 61 else { return nil }
        var i = 19
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
        let days = daysFromCivil(year: y, month: mo, day: d)
        return ((days * 86_400 + h * 3600 + mi * 60 + s) - offset) * 1000 + millis
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

    private static func digits(_ value: Int64, _ width: Int, _ out: inout [UInt8]) {
        var v = value < 0 ? -value : value
        if value < 0 { out.append(0x2D) }
        var tmp = [UInt8](repeating: 0x30, count: width)
        var i = width - 1
        while i >= 0 { tmp[i] = UInt8(0x30 + v % 10); v /= 10; i -= 1 }
        out.append(contentsOf: tmp)
    }
}
