/// A step record's `value` as a decimal: the number of thousandths of a step
/// it holds, parsed from the text (`2741.7` → 2 741 700), which a sample
/// keeps (`StepSample.countThousandths`).
///
/// A value with digits past the third decimal (`0.3333`) is rounded to the
/// nearest thousandth, half to even (`0.0005` → 0, `0.0015` → 2): an error of
/// at most half a thousandth a sample, far inside the "within 1 step a day"
/// the totals promise, where refusing would drop the whole record. Such
/// values are counted (`finerThanThousandths`, `ExportReadSummary.roundedStepRecords`).
struct ExportStepValue: Equatable {
    /// The value in thousandths of a step, rounded half to even past the third decimal.
    var thousandths: UInt64
    /// Whether a digit past the third decimal was not zero (`0.0005`): the
    /// value was rounded to `thousandths`.
    var finerThanThousandths: Bool

    /// The largest whole part a value may have (a step count is 32 bits).
    static let maxWholeSteps = UInt64(UInt32.max)

    /// Whether the value has a fraction (kept in thousandths).
    var hasFraction: Bool { finerThanThousandths || thousandths % 1_000 != 0 }

    /// Why a value is not a step count at all.
    struct Problem: Error, Equatable {
        var reason: String
    }

    /// Digits, optionally a `.` and more digits (`12`, `12.0`, `12.`, `2741.7`;
    /// HealthKit writes `0.5`, never `.5`); anything else — a sign, an exponent, spaces, a whole part beyond
    /// 32 bits — is not a step count.
    static func parse(_ text: UnsafeBufferPointer<UInt8>) -> Result<ExportStepValue, Problem> {
        guard !text.isEmpty else { return .failure(Problem(reason: "empty value")) }
        var whole: UInt64 = 0
        var i = 0
        while i < text.count, text[i] >= UInt8(ascii: "0"), text[i] <= UInt8(ascii: "9") {
            whole = whole * 10 + UInt64(text[i] - UInt8(ascii: "0"))
            if whole > maxWholeSteps { return .failure(Problem(reason: "value \(quoted(text)) is too large for a step count")) }
            i += 1
        }
        let wholeDigits = i
        var fraction: UInt64 = 0
        var fractionDigits = 0
        var finer = false
        // Past the third decimal: the first such digit, and whether any after it is not zero.
        var fourth: UInt8 = 0
        var beyondFourth = false
        if i < text.count, text[i] == UInt8(ascii: ".") {
            i += 1
            while i < text.count, text[i] >= UInt8(ascii: "0"), text[i] <= UInt8(ascii: "9") {
                let digit = text[i] - UInt8(ascii: "0")
                if fractionDigits < 3 {
                    fraction = fraction * 10 + UInt64(digit)
                } else if digit != 0 {
                    finer = true
                    if fractionDigits == 3 { fourth = digit } else { beyondFourth = true }
                }
                fractionDigits += 1
                i += 1
            }
        }
        guard i == text.count, wholeDigits > 0 else {
            if text[0] == UInt8(ascii: "-") { return .failure(Problem(reason: "value \(quoted(text)) is negative")) }
            return .failure(Problem(reason: "value \(quoted(text)) is not a number"))
        }
        for _ in min(fractionDigits, 3)..<3 { fraction *= 10 }
        var thousandths = whole * 1_000 + fraction
        if fourth > 5 || (fourth == 5 && (beyondFourth || thousandths % 2 == 1)) { thousandths += 1 }
        if thousandths / 1_000 > maxWholeSteps { return .failure(Problem(reason: "value \(quoted(text)) is too large for a step count")) }
        return .success(ExportStepValue(thousandths: thousandths, finerThanThousandths: finer))
    }

    /// A value for a message: quoted, at most 40 bytes of it.
    static func quoted(_ text: UnsafeBufferPointer<UInt8>) -> String {
        let shown = String(decoding: text.prefix(40), as: UTF8.self)
        return "\"" + shown + (text.count > 40 ? "…\"" : "\"")
    }
}
