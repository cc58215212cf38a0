import Foundation

/// Where samples come from, as `--source` spells it:
/// `mock[:seed=S,days=D,end=YYYY-MM-DD,perDay=N,watch=0|1,churn=P,latency=MS]` or a path to an
/// Apple Health `export.zip` / `export.xml`.
public enum SourceSpec: Equatable, Sendable {
    case mock(MockConfiguration)
    case export(path: String)

    /// The default source: the seeds' two years of mock data ending today (UTC).
    public static func defaultMock(today: Int64 = MockConfiguration.today()) -> SourceSpec {
        .mock(MockConfiguration(endDay: today))
    }

    /// The built-in mock's made-up steps (not a real source).
    public var isMock: Bool {
        if case .mock = self { return true }
        return false
    }

    /// Parses `--source`. Errors are one line naming the option and value.
    public static func parse(_ text: String, today: Int64 = MockConfiguration.today()) throws -> SourceSpec {
        if text == "mock" { return defaultMock(today: today) }
        if text.hasPrefix("mock:") {
            var config = MockConfiguration(endDay: today)
            var watch: Bool?
            for part in text.dropFirst(5).split(separator: ",", omittingEmptySubsequences: false) {
                let pieces = part.split(separator: "=", maxSplits: 1).map(String.init)
                guard pieces.count == 2, !pieces[1].isEmpty else {
                    throw SourceSpecError("--source \(text): expected key=value, found '\(part)'")
                }
                let (key, value) = (pieces[0], pieces[1])
                func number(_ range: ClosedRange<Int>) throws -> Int {
                    guard let n = Int(value), range.contains(n) else {
                        throw SourceSpecError("--source \(text): \(key) must be a whole number in \(range.lowerBound)...\(range.upperBound), found '\(value)'")
                    }
                    return n
                }
                switch key {
                case "seed":
                    guard let n = UInt64(value) else { throw SourceSpecError("--source \(text): seed must be a non-negative whole number, found '\(value)'") }
                    config.seed = n
                case "days": config.days = try number(1...36_600)
                case "perDay": config.samplesPerDay = try number(1...1_000_000)
                case "latency": config.latencyMilliseconds = try number(0...60_000)
                case "watch": watch = try number(0...1) == 1
                case "churn":
                    guard let p = Double(value), p.isFinite, p >= 0, p <= 1 else {
                        throw SourceSpecError("--source \(text): churn must be a fraction in 0...1, found '\(value)'")
                    }
                    config.churn = p
                case "end":
                    guard let ms = ISO8601.parse(value + "T00:00:00Z") else {
                        throw SourceSpecError("--source \(text): end must be a date YYYY-MM-DD, found '\(value)'")
                    }
                    config.endDay = ms / 86_400_000
                default:
                    throw SourceSpecError("--source \(text): unknown mock option '\(key)' (known: seed, days, end, perDay, watch, churn, latency)")
                }
            }
            if let watch {
                if watch && config.samplesPerDay != nil {
                    throw SourceSpecError("--source \(text): perDay is the iPhone alone; watch=1 cannot go with it")
                }
                config.watch = watch
            }
            return .mock(config)
        }
        return .export(path: text)
    }
}

/// A `--source` that cannot be used.
public struct SourceSpecError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
