import Foundation
import StepLog

/// A `StepDataProvider` over an Apple Health export (`export.zip`, read in
/// place, or `export.xml`) — the real data a Linux user has.
///
/// `init` reads the file once, streaming (see `ExportReader`), and keeps only
/// the `HKQuantityTypeIdentifierStepCount` records, in compact arrays sorted
/// by (start, UUID) with a running sum of counts. Queries are then two binary
/// searches: raw samples are a slice, the aggregate a difference of sums, so
/// the contract's "aggregate == sum of raw" holds by construction.
///
/// Records carry no id in any export version; each gets a UUID derived from
/// its content (`ExportRecordIdentity`, docs/EXPORT.md), so re-importing an
/// export, or importing a newer one that contains the old records, upserts.
///
/// Immutable after `init` (every stored property is a `let` of a Sendable
/// type), hence plainly `Sendable`.
public final class AppleHealthExportProvider: StepDataProvider, Sendable {
    public let path: String
    /// What the read found: records kept and skipped, bytes, time.
    public let summary: ExportReadSummary
    /// "export:" + 16 hex digits of a digest over the samples served: equal
    /// for two files with the same step data, different for a newer export
    /// that has more, or for the same export read into other source names.
    public let sourceIdentity: String

    /// Current samples that carry a HealthKit sync identifier, with its
    /// version (what a deletion pass needs to tell a replaced sample from a
    /// deleted one).
    public let syncedRecords: [ExportSyncedRecord]
    /// Records a higher sync version replaced within this export: not served.
    public let replacedRecords: [ExportSyncedRecord]
    /// Samples whose id includes their `MetadataEntry` children: (the id the
    /// same record had before metadata counted, its id now). A store filled
    /// by an older version holds the legacy id.
    public let reidentifiedSamples: [(legacyID: UUID, id: UUID)]

    private let records: [ExportStepRecord]
    /// `cumulativeCounts[i]` = sum of `records[0..<i].countThousandths`.
    private let cumulativeCounts: [Int64]
    private let sources: [ExportSourceTable.Source]

    private static let dayMilliseconds: Int64 = 86_400_000

    /// Reads the export at `path`. Throws `ExportError` (one line naming the
    /// file and the line or byte offset) when the file is not a readable,
    /// well-formed export; single step records that cannot be samples, or
    /// break the sample contract (checked against `now`, the importer's
    /// clock), are skipped and counted in `summary` instead. `progress` is
    /// called on this thread once when the XML starts streaming, at most
    /// every 0.25 s while reading, and once at the end. A `stop` request ends the read within a chunk's time
    /// (milliseconds), throwing `StoppedByRequest`.
    public init(path: String, now: Date = Date(), stop: StopSignal? = nil,
                progress: (@Sendable (ExportReadProgress) -> Void)? = nil) throws {
        let result = try ExportReader.read(path: path, nowMilliseconds: Milliseconds.from(now), stop: stop, progress: progress)
        self.path = path
        syncedRecords = result.synced
        replacedRecords = result.replaced
        reidentifiedSamples = result.reidentified.map { ($0.legacy.uuid, $0.id.uuid) }
        records = result.records
        sources = result.sources
        var sums = [Int64](repeating: 0, count: records.count + 1)
        for (i, record) in records.enumerated() {
            sums[i + 1] = sums[i] + Int64(record.countThousandths)
        }
        cumulativeCounts = sums
        sourceIdentity = "export:" + Self.hex(Self.digest(of: records, sources: sources))
        summary = result.summary
    }

    /// Number of step samples served.
    public var sampleCount: Int { records.count }

    public func getAggregatedStepCount(for interval: DateInterval) -> Int {
        let range = indices(for: interval)
        return Int(DailyTotals.steps(cumulativeCounts[range.upperBound] - cumulativeCounts[range.lowerBound]))
    }

    /// Declared with the requirement's exact signature, as `layeringRange(now:)`
    /// is, so that no caller can reach the protocol extension's default.
    public func hasSamples(in interval: DateInterval) async throws -> Bool {
        !indices(for: interval).isEmpty
    }

    public func getRawStepSamples(for interval: DateInterval) -> [StepSample] {
        indices(for: interval).map(sample(at:))
    }

    /// `exportRange(now:)`. Declared with the requirement's exact signature
    /// (not as a synchronous method) so that no caller, even one holding the
    /// concrete type in an async context, can reach the protocol extension's
    /// "10 years back" default instead.
    public func layeringRange(now: Date) async throws -> DateInterval {
        exportRange(now: now)
    }

    /// The export's own data range: [start of the UTC day of the earliest
    /// sample, start of the UTC day after the latest one), however many years
    /// that is (the "10 years back" of live sources does not apply to a file
    /// the user hands over). With no step records: the one day ending at the
    /// export date, or at `now` when the export has none.
    public func exportRange(now: Date) -> DateInterval {
        guard let first = records.first, let last = records.last else {
            let end = summary.exportDateMilliseconds ?? Milliseconds.from(now)
            return DateInterval(start: Milliseconds.date(end - Self.dayMilliseconds), end: Milliseconds.date(end))
        }
        let start = Self.floorToDay(first.startMilliseconds)
        let end = Self.floorToDay(last.startMilliseconds) + Self.dayMilliseconds
        return DateInterval(start: Milliseconds.date(start), end: Milliseconds.date(end))
    }

    /// All samples, sorted by (start, UUID).
    public func allSamples() -> [StepSample] {
        records.indices.map(sample(at:))
    }

    // MARK: - The export as a snapshot (what a deletion pass needs)

    /// The export's `<ExportDate>`: samples that start before it and are
    /// missing from the export no longer exist in Health.
    public var exportDateMilliseconds: Int64? { summary.exportDateMilliseconds }

    /// Every current sample's id and start, in the provider's order.
    public func forEachSampleKey(_ body: (_ id: UUID, _ startMilliseconds: Int64) throws -> Void) rethrows {
        for record in records {
            try body(UUIDBytes(high: record.idHigh, low: record.idLow).uuid, record.startMilliseconds)
        }
    }

    /// Whether a sample with this id (which starts at `startMilliseconds`:
    /// the start is part of the id's derivation) is current in the export.
    public func contains(id: UUID, startMilliseconds: Int64) -> Bool {
        recordIndex(id: id, startMilliseconds: startMilliseconds) != nil
    }

    /// The index, in the provider's order, of the sample with this id and
    /// start, or nil when the export does not hold it.
    public func recordIndex(id: UUID, startMilliseconds: Int64) -> Int? {
        let wanted = UUIDBytes(id)
        var i = firstIndex(startingAtOrAfter: startMilliseconds)
        while i < records.count, records[i].startMilliseconds == startMilliseconds {
            if records[i].idHigh == wanted.high, records[i].idLow == wanted.low { return i }
            i += 1
        }
        return nil
    }

    /// Whether the export holds a sample with this exact span and count
    /// (under another id, when asked about a sample it no longer holds):
    /// what a stored sample looks like after its device was renamed, or
    /// after a newer export printed the same record differently (an iOS 8
    /// export's records in a later one).
    public func hasSampleWithSameSpanAndCount(startMilliseconds: Int64, endMilliseconds: Int64, countThousandths: UInt64) -> Bool {
        var i = firstIndex(startingAtOrAfter: startMilliseconds)
        while i < records.count, records[i].startMilliseconds == startMilliseconds {
            if records[i].endMilliseconds == endMilliseconds, UInt64(records[i].countThousandths) == countThousandths { return true }
            i += 1
        }
        return false
    }

    /// The end of the sample at `index` (in the provider's order).
    func endMilliseconds(at index: Int) -> Int64 { records[index].endMilliseconds }

    /// Whether the sample at `index` has exactly these source names (UTF-8
    /// bytes; a nil device name only matches nil).
    func hasSource(at index: Int, bundleId: UnsafeRawBufferPointer, deviceName: UnsafeRawBufferPointer?) -> Bool {
        let source = sources[Int(records[index].source)]
        guard source.sourceBundleId.utf8.elementsEqual(bundleId) else { return false }
        switch (source.sourceDeviceName, deviceName) {
        case (nil, nil): return true
        case let (name?, bytes?): return name.utf8.elementsEqual(bytes)
        default: return false
        }
    }

    // MARK: - Internals

    /// Records whose start is in [interval.start, interval.end), at the
    /// store's millisecond precision.
    private func indices(for interval: DateInterval) -> Range<Int> {
        let lower = firstIndex(startingAtOrAfter: Milliseconds.from(interval.start))
        let upper = firstIndex(startingAtOrAfter: Milliseconds.from(interval.end))
        return lower..<max(lower, upper)
    }

    private func firstIndex(startingAtOrAfter milliseconds: Int64) -> Int {
        var low = 0, high = records.count
        while low < high {
            let mid = (low + high) / 2
            if records[mid].startMilliseconds < milliseconds { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private func sample(at index: Int) -> StepSample {
        let record = records[index]
        let source = sources[Int(record.source)]
        return StepSample(id: UUIDBytes(high: record.idHigh, low: record.idLow).uuid,
                          startMilliseconds: record.startMilliseconds, endMilliseconds: record.endMilliseconds,
                          countThousandths: Int64(record.countThousandths), sourceBundleId: source.sourceBundleId,
                          sourceDeviceName: source.sourceDeviceName, origin: .export)
    }

    private static func floorToDay(_ milliseconds: Int64) -> Int64 {
        let day = milliseconds >= 0 ? milliseconds / dayMilliseconds : (milliseconds - dayMilliseconds + 1) / dayMilliseconds
        return day * dayMilliseconds
    }

    /// MurmurHash3 over the record count (u64 little-endian) and each
    /// record's UUID bytes, in the provider's order, then each source's
    /// `sourceName` and what its samples carry, bundle id and device name
    /// (`field`s as in the identity: u32le length and bytes, 0xFFFFFFFF for
    /// none); the first 64 bits. The UUID covers a sample's span, count and
    /// source; the sources, the names it is served under, which the UUID
    /// does not derive from.
    private static func digest(of records: [ExportStepRecord], sources: [ExportSourceTable.Source]) -> UInt64 {
        var hasher = MurmurHash3x64()
        withUnsafeBytes(of: UInt64(records.count).littleEndian) { hasher.update($0) }
        var batch: [UInt8] = []
        batch.reserveCapacity(16 * 4096)
        for record in records {
            withUnsafeBytes(of: record.idHigh.bigEndian) { batch.append(contentsOf: $0) }
            withUnsafeBytes(of: record.idLow.bigEndian) { batch.append(contentsOf: $0) }
            if batch.count == 16 * 4096 {
                hasher.update(batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        func field(_ text: String?) {
            guard let text else { return withUnsafeBytes(of: UInt32.max.littleEndian) { batch.append(contentsOf: $0) } }
            withUnsafeBytes(of: UInt32(text.utf8.count).littleEndian) { batch.append(contentsOf: $0) }
            batch.append(contentsOf: text.utf8)
        }
        for source in sources {
            field(source.sourceName)
            field(source.sourceBundleId)
            field(source.sourceDeviceName)
        }
        hasher.update(batch)
        return hasher.finalize().0
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
