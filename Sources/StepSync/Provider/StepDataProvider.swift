import Foundation
import StepLog

/// A source of step samples: HealthKit on iOS (the seeds' `HealthKitManager`),
/// the built-in mock, or an Apple Health export file.
///
/// Every conforming type guarantees:
/// - **Half-open membership by start.** A sample belongs to the interval
///   [start, end) exactly when `start <= sample.startDate < end` (HealthKit's
///   `.strictStartDate`). Adjacent intervals never both count a sample, and an
///   interval split in two counts the same samples as the whole.
/// - **Consistency.** `getAggregatedStepCount(for: i)` equals the sum of `count`
///   over `getRawStepSamples(for: i)` (in whole steps), and `hasSamples(in: i)`
///   is true exactly when `getRawStepSamples(for: i)` is not empty, for every
///   interval.
/// - **Order.** Raw samples come sorted by startDate (then by UUID).
/// - **Stable identity.** Asking twice for the same interval returns the same
///   samples with the same UUIDs, so a re-fetch upserts instead of duplicating.
/// - Intervals are at millisecond precision (the store's), and the
///   layering only asks for intervals within `layeringRange(now:)`.
/// - **Deletions, shaped like `HKAnchoredObjectQuery`.** The raw samples are
///   the query's added samples; `deletedSamples(since:in:)` is its deleted
///   objects and new anchor. A provider that reports deletions names a
///   `deletionFamily`; the store keeps the anchor per family
///   (`recordSourceAnchor`) once the deletions are durable, and passes it back
///   on the next run. A provider guarantees:
///   - no UUID it reports deleted is among the samples it serves (a replaced
///     sample gets a new UUID; a consolidation's new sample too), so deletions
///     and additions can be applied in either order;
///   - reporting a UUID the store never had, or already deleted, is harmless
///     (the store writes nothing for it), so the same deletions may be reported
///     again, from the same anchor, after a run that was killed before it
///     recorded the new anchor: applying them twice is applying them once;
///   - it never reports a deletion for a sample of another source (a snapshot
///     compares only the stored samples of its own origin, and in a store
///     written before origins were recorded the unlabeled ones it could have
///     produced).
///   Deletions are computed before anything is written, so a provider may
///   refuse (throw a one-line error) and the store stays as it was.
public protocol StepDataProvider: Sendable {
    /// The sum of step counts of the samples that start in `interval`.
    func getAggregatedStepCount(for interval: DateInterval) async throws -> Int

    /// Whether any sample starts in `interval`. Layering asks it only where
    /// the aggregate is 0, so that an interval holding samples of 0 steps (or
    /// of fractions that round to none) is fetched like any other rather than
    /// recorded empty with its samples left behind.
    func hasSamples(in interval: DateInterval) async throws -> Bool

    /// The samples that start in `interval`, sorted by startDate.
    func getRawStepSamples(for interval: DateInterval) async throws -> [StepSample]

    /// The range layering searches for data in: 10 years back from `now` for
    /// live sources (the seeds' rule); a file's own data range for exports.
    func layeringRange(now: Date) async throws -> DateInterval

    /// Identifies the data this source serves. A store remembers the identity
    /// its intervals were layered from: the same identity resumes them, a
    /// different one (another export, another mock day) layers again (samples
    /// already stored are kept and upserted).
    var sourceIdentity: String { get }

    /// The family under which the store keeps this provider's anchor
    /// (`recordSourceAnchor(family:anchor:)`); nil for a provider that never
    /// reports deletions (the default), which makes ingest purely additive.
    var deletionFamily: String? { get }

    /// The samples that no longer exist, and the anchor to record once their
    /// deletions are durable. `anchor` is what the store last recorded for
    /// `deletionFamily` (nil on a first run). A change feed (HealthKit, the
    /// mock's churn) lists what was deleted since `anchor`; a snapshot (an
    /// export) compares itself with the samples `store` holds and sets
    /// `SourceDeletions.comparedWith`. Reads `store`, never writes it. Throws
    /// a one-line error when the source must not be applied (an export older
    /// than the last one imported).
    func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions
}

extension StepDataProvider {
    public var deletionFamily: String? { nil }

    /// A provider that knows no cheaper way asks for the samples themselves.
    public func hasSamples(in interval: DateInterval) async throws -> Bool {
        try await !getRawStepSamples(for: interval).isEmpty
    }

    /// No deletions: the anchor is kept as it was.
    public func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions {
        SourceDeletions(ids: [], anchor: anchor ?? [])
    }

    /// The seeds' range: 10 calendar years back from `now` (UTC).
    public func layeringRange(now: Date) async throws -> DateInterval {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let start = calendar.date(byAdding: .year, value: -10, to: now)!
        return DateInterval(start: start, end: now)
    }
}
