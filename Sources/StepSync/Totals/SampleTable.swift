import StepLog

/// Samples as the merge reads them: 24 bytes each (start, end, count and an
/// index into `sources`), with each distinct source kept once. Millions of
/// samples from a store fit in tens of megabytes, and the merge never touches
/// a string.
public struct SampleTable: Sendable {
    public struct Entry: Sendable {
        public var start: Int64
        public var end: Int64
        public var count: UInt32
        /// Index into `sources` (or, inside the merge, a priority position).
        public var source: UInt32
    }

    public private(set) var entries: [Entry] = []
    /// Distinct sources in order of first appearance.
    public private(set) var sources: [StepSource] = []
    private var sourceIndex: [StepSource: UInt32] = [:]
    private var lastSource: (bundleId: String, deviceName: String?, index: UInt32)?

    public init() {}

    public init<S: Sequence>(_ samples: S) where S.Element == StepSample {
        for s in samples { append(s) }
    }

    /// Every sample of the store (its current version), in log order.
    public init(store: StepLogStore) throws {
        entries.reserveCapacity(store.counts.samples)
        try store.forEachSample { append($0.sample) }
    }

    public var count: Int { entries.count }

    /// Adds a sample; a count outside 0...UInt32.max (which the store refuses) is clamped.
    public mutating func append(_ s: StepSample) {
        entries.append(Entry(start: s.startMilliseconds, end: max(s.startMilliseconds, s.endMilliseconds),
                             count: UInt32(clamping: s.count), source: index(s.sourceBundleId, s.sourceDeviceName)))
    }

    /// The interned index of a source; consecutive samples mostly share one,
    /// so the last is checked (bytewise) before the dictionary.
    private mutating func index(_ bundleId: String, _ deviceName: String?) -> UInt32 {
        if let last = lastSource, sameBytes(last.bundleId, bundleId), sameBytes(last.deviceName, deviceName) { return last.index }
        let source = StepSource(bundleId: bundleId, deviceName: deviceName)
        let index: UInt32
        if let known = sourceIndex[source] {
            index = known
        } else {
            index = UInt32(sources.count)
            sources.append(source)
            sourceIndex[source] = index
        }
        lastSource = (bundleId, deviceName, index)
        return index
    }

    private func sameBytes(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let x?, let y?): return x.utf8.elementsEqual(y.utf8)
        default: return false
        }
    }

    /// The local days from the earliest sample's start to the latest instant
    /// any sample covers (its end, exclusive; an instantaneous one's start),
    /// or nil when there are no samples.
    public func dayRange(in calendar: LocalDayCalendar) -> ClosedRange<Int64>? {
        guard !entries.isEmpty else { return nil }
        var first = Int64.max, last = Int64.min
        for e in entries {
            first = min(first, e.start)
            last = max(last, e.end > e.start ? e.end - 1 : e.start)
        }
        return calendar.localDay(ofMilliseconds: first)...calendar.localDay(ofMilliseconds: last)
    }
}
