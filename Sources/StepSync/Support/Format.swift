import Foundation

/// Number formatting for people (stdout summaries, progress on stderr).
public enum Format {
    /// 1234567 → "1,234,567".
    public static func count<I: BinaryInteger>(_ n: I) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }

    /// A count and its noun, plural unless it is one: "1 segment", "1,024 records".
    public static func count<I: BinaryInteger>(_ n: I, _ noun: String) -> String {
        "\(count(n)) \(noun)\(n == 1 ? "" : "s")"
    }

    /// Bytes as "12.3 MiB".
    public static func bytes<I: BinaryInteger>(_ n: I) -> String {
        let v = Double(n)
        if v < 1024 { return "\(n) B" }
        if v < 1024 * 1024 { return String(format: "%.1f KiB", v / 1024) }
        if v < 1024 * 1024 * 1024 { return String(format: "%.1f MiB", v / 1_048_576) }
        return String(format: "%.2f GiB", v / 1_073_741_824)
    }

    /// Seconds as "0.42 s", "12 s", "3m05s", "2h03m".
    public static func duration(_ seconds: Double) -> String {
        if seconds < 10 { return String(format: "%.2f s", seconds) }
        if seconds < 60 { return String(format: "%.0f s", seconds) }
        let s = Int(seconds.rounded())
        if s < 3600 { return String(format: "%dm%02ds", s / 60, s % 60) }
        return String(format: "%dh%02dm", s / 3600, s / 60 % 60)
    }

    public static func percent(_ fraction: Double) -> String { String(format: "%.0f%%", fraction * 100) }
}
