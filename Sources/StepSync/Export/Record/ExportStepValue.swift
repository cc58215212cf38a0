/// A step record's `value` as a decimal: the number of thousandths of a step
/// it holds, parsed exactly from the text (`2741.7` → 2 741 700).
///
/// Today a sample takes only whole steps (`wholeSteps`): the record builder
/// skips a value with a fraction, with its reason, and counts it apart
/// (`ExportReadSummary.fractionalStepRecords`). Keeping fractions later needs
/// only the thousandths, which are already here.
struct ExportStepValue: Equatable {
    /// The value in thousandths of a step, its digits past the third decimal dropped.
    var thousandths: UInt64
    /// Whether a digit past the third decimal was not zero (`0.0005`): the
    /// value is then not exactly `thousandths`.
    var finerThanThousandths: Bool

    /// The largest whole part a value may have (a step count is 32 bits).
    static let maxWholeSteps = UInt64(UInt32.max)

    /// The whole number of steps, or nil when the value has a fraction.
    var wholeSteps: UInt32? {
        guard !finerThanThousandths, thousandths % 1_000 == 0 else { return nil }
        return UInt32(thousandths / 1_000)
    }

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
        if i < text.count, text[i] == UInt8(ascii: ".") {
            i += 1
            while i < text.count, text[i] >= UInt8(ascii: "0"), text[i] <= UInt8(ascii: "9") {
                if fractionDigits < 3 {
                    fraction = fraction * 10 + UInt64(text[i] - UInt8(ascii: "0"))
                } else if text[i] != UInt8(ascii: "0") {
                    finer = true
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
        return .success(ExportStepValue(thousandths: whole * 1_000 + fraction, finerThanThousandths: finer))
    }

    /// Why a value with a fraction is skipped, for now.
    static func fractionReason(_ text: UnsafeBufferPointer<UInt8>) -> String {
        "value \(quoted(text)) is not a whole number (fractional steps are not stored yet)"
    }

    /// A value for a message: quoted, at most 40 bytes of it.
    static func quoted(_ text: UnsafeBufferPointer<UInt8>) -> String {
        let shown = String(decoding: text.prefix(40), as: UTF8.self)
        return "\"" + shown + (text.count > 40 ? "…\"" : "\"")
    }
}
