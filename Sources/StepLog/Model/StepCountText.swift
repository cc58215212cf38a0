/// A step count in thousandths as the decimal text the wire, `dump` and the
/// messages show: the whole steps, then `.` and the thousandths without their
/// trailing zeros when there are any (`2741700` → `2741.7`, `42000` → `42`).
/// A whole count is the integer it always was, byte for byte.
public enum StepCountText {
    public static func format(thousandths: Int64) -> String {
        String(decoding: bytes(thousandths: thousandths), as: UTF8.self)
    }

    /// The same text as UTF-8 bytes (JSON writers append them).
    public static func bytes(thousandths: Int64) -> [UInt8] {
        let negative = thousandths < 0
        let magnitude = thousandths.magnitude
        var out: [UInt8] = negative ? [UInt8(ascii: "-")] : []
        out += Array(String(magnitude / 1000).utf8)
        var fraction = magnitude % 1000
        if fraction != 0 {
            out.append(UInt8(ascii: "."))
            var digits = 3
            while fraction % 10 == 0 { fraction /= 10; digits -= 1 }
            let text = Array(String(fraction).utf8)
            out += repeatElement(UInt8(ascii: "0"), count: digits - text.count)
            out += text
        }
        return out
    }
}
