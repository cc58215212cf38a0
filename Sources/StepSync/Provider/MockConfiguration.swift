import Foundation

/// What the built-in mock serves: `--source mock[:seed=S,days=D,end=YYYY-MM-DD,perDay=N,watch=0|1,churn=P,latency=MS]`.
public struct MockConfiguration: Hashable, Sendable {
    public var seed: UInt64 = 42
    /// Days with data, ending at `endDay` (exclusive).
    public var days = 730
    /// First day without data, as days since 1970-01-01 (UTC). Default: today.
    public var endDay: Int64
    /// Samples a day; nil for the seeds' 50–200 (with 5,000–15,000 steps a day).
    /// Set, each day has exactly this many samples (about 75 steps each): the
    /// knob benchmarks turn to reach 10 GB through the real pipeline. The
    /// iPhone only: there is no Watch with `perDay`.
    public var samplesPerDay: Int? {
        didSet { if samplesPerDay != nil { watch = false } }
    }
    /// An Apple Watch beside the iPhone on some days (`MockWatchStream`);
    /// `watch=0` gives the iPhone alone, the mock as it was before the Watch.
    public var watch = true
    /// Simulated query latency (the seeds use 50 ms aggregate, 100 ms raw):
    /// aggregate queries wait this long, raw queries twice as long.
    public var latencyMilliseconds = 0
    /// The fraction of older samples (days before `end - 1`) consolidated,
    /// deleted or replaced, as Health does between two days (`MockChurn`);
    /// 0 for none. The mock then reports the originals as deleted.
    public var churn = 0.0

    public init(seed: UInt64 = 42, days: Int = 730, endDay: Int64, samplesPerDay: Int? = nil, watch: Bool = true,
                latencyMilliseconds: Int = 0, churn: Double = 0) {
        self.seed = seed
        self.days = days
        self.endDay = endDay
        self.samplesPerDay = samplesPerDay
        self.watch = watch && samplesPerDay == nil
        self.latencyMilliseconds = latencyMilliseconds
        self.churn = churn
    }

    /// Today (UTC) as days since 1970.
    public static func today(_ now: Date = Date()) -> Int64 {
        ISO8601.floorDivide(Int64(now.timeIntervalSince1970.rounded(.down)), 86_400).0
    }

    public var firstDay: Int64 { endDay - Int64(days) }

    /// The canonical spelling, which is also the source's identity: `watch=1`
    /// is spelled out, so a store layered from the iPhone-only mock (which had
    /// no such option and the spelling of `watch=0`) is layered again;
    /// `churn` only when set, so the un-churned mock keeps its identity.
    public var description: String {
        let (y, m, d) = ISO8601.civil(fromDays: endDay)
        var text = "mock:seed=\(seed),days=\(days),end=" + String(format: "%04lld-%02d-%02d", y, m, d)
        if let samplesPerDay { text += ",perDay=\(samplesPerDay)" }
        if watch { text += ",watch=1" }
        if churn > 0 { text += ",churn=\(churn)" }
        return text
    }
}
