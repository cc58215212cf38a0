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
///   over `getRawStepSamples(for: i)`, for every interval.
/// - **Order.** Raw samples come sorted by startDate (then by UUID).
/// - **Stable identity.** Asking twice for the same interval returns the same
///   samples with the same UUIDs, so a re-fetch upserts instead of duplicating.
/// - Intervals are at millisecond precision (the store's), and the
///   layering only asks for intervals within `layeringRange(now:)`.
public protocol StepDataProvider: Sendable {
    /// The sum of step counts of the samples that start in `interval`.
    func getAggregatedStepCount(for interval: DateInterval) async throws -> Int

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
}

extension StepDataProvider {
    /// The seeds' range: 10 calendar years back from `now` (UTC).
    public func layeringRange(now: Date) async throws -> DateInterval {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let start = calendar.date(byAdding: .year, value: -10, to: now)!
        return DateInterval(start: start, end: now)
    }
}
