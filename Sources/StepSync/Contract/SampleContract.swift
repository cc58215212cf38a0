import StepLog

/// The one sample contract between client and server: what `POST /steps`
/// accepts is exactly what an import may store, so a stored sample can always
/// be uploaded. The server's contract module carries the same numbers, and
/// both test suites check the shared vectors in
/// `Tests/Fixtures/contract/samples.json`.
///
/// A sample, in the API's JSON shape:
/// - `id`: 1–64 characters from `A-Z a-z 0-9 . _ : -`;
/// - `startDate`, `endDate`: RFC 3339, `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`
///   with at most 9 fraction digits; 2000-01-01T00:00:00Z ≤ startDate ≤
///   endDate ≤ now + 24 h, and endDate − startDate ≤ 48 h ("now": the
///   server's receive time, the importer's clock at import time);
/// - `count`: a number of steps 0…1,000,000 with at most three decimals (a
///   whole count is an integer; `2741.7` is kept as 2 741 700 thousandths).
///   The number is read as the nearest double `d`, as JSON parsers do; it has
///   at most three decimals when `d × 1000` is within a millionth of a whole
///   number (`countTolerance`), which every literal of at most three decimals
///   is and no literal with a fourth non-zero decimal is;
/// - `sourceBundleId`: 1–512 UTF-8 bytes without U+0000;
/// - `sourceDeviceName`: null, or 0–512 UTF-8 bytes without U+0000.
///
/// Checks run field by field in that order and report the first field that
/// fails; a rule relating two fields belongs to the later one (endDate before
/// startDate is an `endDate` violation).
public enum SampleContract {
    public static let idMaxCharacters = 64
    public static let earliestStartMilliseconds: Int64 = 946_684_800_000        // 2000-01-01T00:00:00Z
    public static let futureToleranceMilliseconds: Int64 = 24 * 3_600_000      // endDate ≤ now + 24 h
    public static let maxDurationMilliseconds: Int64 = 48 * 3_600_000          // endDate − startDate ≤ 48 h
    public static let maxCount = 1_000_000
    public static let maxCountThousandths = Int64(maxCount) * 1000
    /// How far `d × 1000` may be from a whole number of thousandths (the
    /// double's rounding, under 1.2e-7 up to `maxCount`).
    public static let countTolerance = 1e-6
    public static let maxSourceBundleIdBytes = 512
    public static let maxSourceDeviceNameBytes = 512
    public static let maxFractionDigits = 9

    /// The sample's fields, in the order they are checked.
    public enum Field: String, Sendable, CaseIterable {
        case id, startDate, endDate, count, sourceBundleId, sourceDeviceName
    }

    /// The first rule a sample breaks: its field, and one phrase saying how.
    public struct Violation: Sendable, Equatable, CustomStringConvertible {
        public var field: Field
        public var reason: String

        public init(_ field: Field, _ reason: String) {
            self.field = field
            self.reason = reason
        }

        public var description: String { reason }
    }

    /// An instant with the wire's nanosecond precision (the store keeps
    /// milliseconds), ordered.
    public struct Instant: Sendable, Comparable, Hashable {
        public var seconds: Int64
        /// 0 ..< 1_000_000_000.
        public var nanoseconds: Int32

        public init(seconds: Int64, nanoseconds: Int32 = 0) {
            self.seconds = seconds
            self.nanoseconds = nanoseconds
        }

        public init(milliseconds: Int64) {
            let (seconds, millis) = ISO8601.floorDivide(milliseconds, 1000)
            self.init(seconds: seconds, nanoseconds: Int32(millis) * 1_000_000)
        }

        public static func < (a: Instant, b: Instant) -> Bool {
            (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
        }

        /// `self` plus `milliseconds` (never near overflow for the contract's values).
        func adding(milliseconds: Int64) -> Instant {
            let (seconds, millis) = ISO8601.floorDivide(milliseconds, 1000)
            var result = Instant(seconds: self.seconds + seconds, nanoseconds: nanoseconds + Int32(millis) * 1_000_000)
            if result.nanoseconds >= 1_000_000_000 {
                result.seconds += 1
                result.nanoseconds -= 1_000_000_000
            }
            return result
        }

        /// RFC 3339 in UTC, with milliseconds when the instant has them.
        var text: String {
            guard seconds > Int64.min / 1000 + 1, seconds < Int64.max / 1000 - 1 else { return "\(seconds) s since 1970" }
            return ISO8601.format(milliseconds: seconds * 1000 + Int64(nanoseconds / 1_000_000))
        }
    }

    // MARK: - Checks

    /// Checks a sample as the client holds it (instants in whole
    /// milliseconds, which always format as valid RFC 3339 text).
    public static func check(_ sample: StepSample, nowMilliseconds: Int64) -> Violation? {
        if let problem = checkID(sample.id.uuidString) { return problem }
        return checkContent(start: Instant(milliseconds: sample.startMilliseconds),
                            end: Instant(milliseconds: sample.endMilliseconds), countThousandths: sample.countThousandths,
                            sourceBundleId: sample.sourceBundleId, sourceDeviceName: sample.sourceDeviceName,
                            now: Instant(milliseconds: nowMilliseconds))
    }

    /// Checks a sample in its wire form: the dates as the JSON strings, the
    /// count in thousandths (`thousandths(ofCount:)`; nil when it has more than three decimals).
    public static func check(id: String, startDate: String, endDate: String, countThousandths: Int64?, sourceBundleId: String,
                             sourceDeviceName: String?, now: Instant) -> Violation? {
        if let problem = checkID(id) { return problem }
        guard let start = parseTimestamp(startDate) else { return Violation(.startDate, notATimestamp(.startDate, startDate)) }
        if start < earliestStart { return tooEarly(start) }
        guard let end = parseTimestamp(endDate) else { return Violation(.endDate, notATimestamp(.endDate, endDate)) }
        if let problem = checkDates(start: start, end: end, now: now) { return problem }
        guard let countThousandths else { return Violation(.count, "count has more than three decimals") }
        if let problem = checkCount(thousandths: countThousandths) { return problem }
        return checkSource(sourceBundleId: sourceBundleId, sourceDeviceName: sourceDeviceName)
    }

    /// A JSON number's thousandths, or nil when it has more than three
    /// decimals (is not finite): the rule of `count` above.
    public static func thousandths(ofCount value: Double) -> Int64? {
        let scaled = value * 1000
        guard scaled.isFinite, abs(scaled) < 9e15 else { return nil }
        let whole = scaled.rounded()
        guard abs(scaled - whole) < countTolerance else { return nil }
        return Int64(whole)
    }

    public static func checkID(_ id: String) -> Violation? {
        var characters = 0
        for byte in id.utf8 {
            characters += 1
            guard isIDByte(byte), characters <= idMaxCharacters else {
                return Violation(.id, "id must be 1 to \(idMaxCharacters) characters from A-Z a-z 0-9 . _ : -")
            }
        }
        return characters == 0 ? Violation(.id, "id is empty") : nil
    }

    /// The rules on dates and count for an import: `startDate` onwards.
    public static func checkContent(start: Instant, end: Instant, countThousandths: Int64, sourceBundleId: String,
                                    sourceDeviceName: String?, now: Instant) -> Violation? {
        if let problem = checkDates(start: start, end: end, now: now) { return problem }
        if let problem = checkCount(thousandths: countThousandths) { return problem }
        return checkSource(sourceBundleId: sourceBundleId, sourceDeviceName: sourceDeviceName)
    }

    public static func checkDates(start: Instant, end: Instant, now: Instant) -> Violation? {
        if start < earliestStart { return tooEarly(start) }
        if end < start { return Violation(.endDate, "endDate \(end.text) is before startDate \(start.text)") }
        let latest = now.adding(milliseconds: futureToleranceMilliseconds)
        if end > latest {
            return Violation(.endDate, "endDate \(end.text) is more than 24 h after now (\(now.text))")
        }
        if end > start.adding(milliseconds: maxDurationMilliseconds) {
            return Violation(.endDate, "endDate \(end.text) is more than 48 h after startDate \(start.text)")
        }
        return nil
    }

    public static func checkCount(thousandths: Int64) -> Violation? {
        guard thousandths >= 0, thousandths <= maxCountThousandths else {
            return Violation(.count, "count \(StepCountText.format(thousandths: thousandths)) is outside 0…\(maxCount)")
        }
        return nil
    }

    /// The two name fields; an import checks them once per distinct source.
    public static func checkSource(sourceBundleId: String, sourceDeviceName: String?) -> Violation? {
        let bundleBytes = sourceBundleId.utf8.count
        if bundleBytes == 0 { return Violation(.sourceBundleId, "sourceBundleId is empty") }
        if bundleBytes > maxSourceBundleIdBytes {
            return Violation(.sourceBundleId, "sourceBundleId is \(bundleBytes) UTF-8 bytes (at most \(maxSourceBundleIdBytes))")
        }
        if sourceBundleId.utf8.contains(0) { return Violation(.sourceBundleId, "sourceBundleId contains U+0000") }
        if let device = sourceDeviceName {
            let deviceBytes = device.utf8.count
            if deviceBytes > maxSourceDeviceNameBytes {
                return Violation(.sourceDeviceName, "sourceDeviceName is \(deviceBytes) UTF-8 bytes (at most \(maxSourceDeviceNameBytes))")
            }
            if device.utf8.contains(0) { return Violation(.sourceDeviceName, "sourceDeviceName contains U+0000") }
        }
        return nil
    }

    // MARK: - Timestamps

    /// Parses the contract's RFC 3339 form, `YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|±HH:MM)`,
    /// calendar-checked (no 30 February, no hour 24, no leap second); uppercase
    /// `T` and `Z` only. Nil for anything else.
    public static func parseTimestamp(_ text: String) -> Instant? {
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int64? {
            guard from + count <= b.count else { return nil }
            var value: Int64 = 0
            for i in from..<(from + count) {
                let d = b[i] &- UInt8(ascii: "0")
                guard d <= 9 else { return nil }
                value = value * 10 + Int64(d)
            }
            return value
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
              let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
              (1...12).contains(month), day >= 1, day <= ISO8601.daysInMonth(year: year, month: month),
              hour <= 23, minute <= 59, second <= 59
        else { return nil }
        var i = 19
        var nanoseconds: Int32 = 0
        if b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            var scale: Int32 = 100_000_000
            while i < b.count, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") {
                digits += 1
                guard digits <= maxFractionDigits else { return nil }
                nanoseconds += Int32(b[i] - UInt8(ascii: "0")) * scale
                scale /= 10
                i += 1
            }
            guard digits > 0 else { return nil }
        }
        guard i < b.count else { return nil }
        var offsetSeconds: Int64 = 0
        if b[i] == UInt8(ascii: "Z") {
            i += 1
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard i + 6 <= b.count, b[i + 3] == UInt8(ascii: ":"),
                  let offsetHours = number(i + 1, 2), let offsetMinutes = number(i + 4, 2),
                  offsetHours <= 23, offsetMinutes <= 59 else { return nil }
            offsetSeconds = (offsetHours * 3_600 + offsetMinutes * 60) * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = ISO8601.daysFromCivil(year: year, month: month, day: day)
        return Instant(seconds: days * 86_400 + hour * 3_600 + minute * 60 + second - offsetSeconds, nanoseconds: nanoseconds)
    }

    // MARK: - Internals

    static let earliestStart = Instant(milliseconds: earliestStartMilliseconds)

    private static func tooEarly(_ start: Instant) -> Violation {
        Violation(.startDate, "startDate \(start.text) is before \(earliestStart.text)")
    }

    private static func notATimestamp(_ field: Field, _ text: String) -> String {
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return "\(field.rawValue) \"\(shown)\" is not an RFC 3339 date-time like 2024-01-15T10:30:00Z"
    }

    @inline(__always)
    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}
