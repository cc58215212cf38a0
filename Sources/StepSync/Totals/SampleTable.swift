import Foundation
import StepLog

/// Samples as the merge reads them: 32 bytes each (start, end, count in
/// thousandths and an index into `sources`), with each distinct source kept once. Millions of
/// samples from a store fit in tens of megabytes, and the merge never touches
/// a string.
public struct SampleTable: Sendable {
    public struct Entry: Sendable {
        public var start: Int64
        public var end: Int64
        /// The count in thousandths of a step.
        public var countThousandths: UInt64
        /// Index into `sources` (or, inside the merge, a priority position).
        public var source: UInt32

        /// Instants are kept within ±2^60 ms (±36 million years), so no
        /// difference of two overflows: only a damaged record lies outside.
        static let limit: Int64 = 1 << 60

        @inline(__always)
        init(start: Int64, end: Int64, countThousandths: UInt64, source: UInt32) {
            self.start = start
            self.end = end
            self.countThousandths = countThousandths
            self.source = source
        }

        /// From a sample's fields: times clamped to ±`limit`, end at least start.
        @inline(__always)
        init(_ start: Int64, _ end: Int64, _ countThousandths: UInt64, _ source: UInt32) {
            let s = min(max(start, -Self.limit), Self.limit)
            self.init(start: s, end: min(max(end, s), Self.limit), countThousandths: countThousandths, source: source)
        }
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

    /// Every sample of the store (its current version), in log order, read
    /// in place (`forEachSampleSpan`) by up to `threads` threads over runs of
    /// segments; sources are compared as bytes, and a `String` is made only
    /// for each distinct source.
    ///
    /// First every sample record is read without looking it up in the index
    /// (`forEachSampleRecordSpan`); when there were as many records as live
    /// samples, they are the samples. Otherwise (a sample rewritten or
    /// deleted), that is thrown away and the current versions are read
    /// (`forEachSampleSpan`). A store with pending deletions is read that way
    /// at once: a deleted sample's record is still there, so the counts
    /// cannot match.
    public init(store: StepLogStore, threads: Int = min(4, ProcessInfo.processInfo.activeProcessorCount)) throws {
        let counts = store.counts
        let total = counts.samples
        func builders() -> [Builder] {
            (0..<max(1, threads)).map { p in Builder(capacity: p == 0 ? total : total / max(1, threads) + total / 16) }
        }
        var parts: [Builder] = []
        var allLive = false
        if counts.pendingDeletions == 0 {
            parts = builders()
            let read = try { (unchecked: [Builder]) in
                try store.forEachSampleRecordSpan(parts: unchecked.count) { p, span in unchecked[p].add(span) }
            }(parts)
            allLive = read.records == read.liveSamples
        }
        if !allLive {
            parts = builders()
            let checked = parts
            try store.forEachSampleSpan(parts: checked.count) { p, span in checked[p].add(span) }
        }
        var table = SampleTable()
        var entries = parts[0].takeEntries()
        for source in parts[0].sources { _ = table.intern(source) } // the same indices, in the same order
        for part in parts.dropFirst() {
            let global = part.sources.map { table.intern($0) }
            for var e in part.takeEntries() {
                e.source = global[Int(e.source)]
                entries.append(e)
            }
        }
        table.entries = entries
        self = table
    }

    /// One run's samples: its own entries and sources, touched by the one
    /// thread that reads the run (so unchecked: nothing is shared).
    private final class Builder: @unchecked Sendable {
        @exclusivity(unchecked) private var entries: [Entry] = []
        @exclusivity(unchecked) private(set) var sources: [StepSource] = []
        /// Each source's bytes, by index: samples of a few sources alternate,
        /// so a sample's source is found by comparing bytes with these.
        @exclusivity(unchecked) private var known: [(bundle: [UInt8], device: [UInt8]?)] = []
        @exclusivity(unchecked) private var byBytes: [[UInt8]: UInt32] = [:]
        @exclusivity(unchecked) private var last: Int = -1
        static let linearLimit = 64

        init(capacity: Int) { entries.reserveCapacity(capacity) }

        func takeEntries() -> [Entry] {
            var taken: [Entry] = []
            swap(&taken, &entries)
            return taken
        }

        @inline(__always)
        func add(_ s: SampleSpan) {
            entries.append(Entry(s.startMilliseconds, s.endMilliseconds, s.countThousandths, index(s)))
        }

        @inline(__always)
        private func index(_ s: SampleSpan) -> UInt32 {
            if last >= 0, Self.same(known[last], s) { return UInt32(last) }
            if known.count <= Self.linearLimit {
                for i in known.indices where Self.same(known[i], s) {
                    last = i
                    return UInt32(i)
                }
            }
            return intern(s)
        }

        private func intern(_ s: SampleSpan) -> UInt32 {
            let bundle = Array(s.sourceBundleId), device = s.sourceDeviceName.map { Array($0) }
            var key = bundle
            if let device { key.append(0xFF); key += device } else { key.append(0xFE) } // never UTF-8 bytes
            let index: UInt32
            if let found = byBytes[key] {
                index = found
            } else {
                index = UInt32(sources.count)
                sources.append(StepSource(bundleId: String(decoding: bundle, as: UTF8.self), deviceName: device.map { String(decoding: $0, as: UTF8.self) }))
                known.append((bundle, device))
                byBytes[key] = index
            }
            last = Int(index)
            return index
        }

        @inline(__always)
        private static func same(_ k: (bundle: [UInt8], device: [UInt8]?), _ s: SampleSpan) -> Bool {
            same(k.bundle, s.sourceBundleId) && same(k.device, s.sourceDeviceName)
        }

        @inline(__always)
        private static func same(_ a: [UInt8]?, _ b: UnsafeRawBufferPointer?) -> Bool {
            switch (a, b) {
            case (nil, nil): return true
            case (let x?, let y?):
                return x.count == y.count && x.withUnsafeBytes { x in x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0 }
            default: return false
            }
        }
    }

    private mutating func intern(_ source: StepSource) -> UInt32 {
        if let known = sourceIndex[source] { return known }
        let index = UInt32(sources.count)
        sources.append(source)
        sourceIndex[source] = index
        return index
    }

    public var count: Int { entries.count }

    /// Drops the entries `shouldRemove` picks (by their fields and source).
    public mutating func removeAll(where shouldRemove: (Entry, StepSource) -> Bool) {
        let sources = self.sources
        entries.removeAll { shouldRemove($0, sources[Int($0.source)]) }
    }

    /// Moves the entries out (the merge sorts them in place, without a copy).
    mutating func takeEntries() -> [Entry] {
        var taken: [Entry] = []
        swap(&taken, &entries)
        return taken
    }

    /// Adds a sample; a count outside `StepSample`'s range (which the store refuses) is clamped.
    public mutating func append(_ s: StepSample) {
        let thousandths = UInt64(clamping: min(s.countThousandths, StepSample.maxCountThousandths))
        entries.append(Entry(s.startMilliseconds, s.endMilliseconds, thousandths, index(s.sourceBundleId, s.sourceDeviceName)))
    }

    /// The interned index of a source; consecutive samples mostly share one,
    /// so the last is checked (bytewise) before the dictionary.
    private mutating func index(_ bundleId: String, _ deviceName: String?) -> UInt32 {
        if let last = lastSource, sameBytes(last.bundleId, bundleId), sameBytes(last.deviceName, deviceName) { return last.index }
        let index = intern(StepSource(bundleId: bundleId, deviceName: deviceName))
        lastSource = (bundleId, deviceName, index)
        return index
    }

    @inline(__always)
    private func sameBytes(_ a: String?, _ b: String?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (var x?, var y?):
            // memcmp of the contiguous UTF-8 (native strings: no copy); the
            // generic elementsEqual walks byte by byte.
            guard x.utf8.count == y.utf8.count else { return false }
            return x.withUTF8 { p in y.withUTF8 { q in p.count == 0 || memcmp(p.baseAddress!, q.baseAddress!, p.count) == 0 } }
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
