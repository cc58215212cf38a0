import Foundation
import StepLog

/// The mock as a change feed: with `churn`, it reports the samples churn
/// removed (`MockChurn`) — the un-churned mock's UUIDs, whichever of them a
/// store holds — so a store filled from an earlier day ends up equal to it.
extension MockStepDataProvider {
    public var deletionFamily: String? { "mock:seed=\(configuration.seed)" }

    /// Every UUID churn removed from the mock's days. The list depends on the
    /// configuration alone, not on `anchor`: the mock keeps no history, and
    /// reporting a deletion again writes nothing. The new anchor is the
    /// configuration's spelling.
    public func deletedSamples(since anchor: [UInt8]?, in store: StepLogStore) async throws -> SourceDeletions {
        SourceDeletions(ids: churnedIDs(), anchor: Array(configuration.description.utf8))
    }

    /// The un-churned mock's UUIDs that churn removed, in day order.
    public func churnedIDs() -> [UUID] {
        guard configuration.churn > 0 else { return [] }
        var ids: [UUID] = []
        var d = configuration.firstDay
        while MockChurn.churns(day: d, endDay: configuration.endDay, probability: configuration.churn) {
            ids += MockDay(configuration, day: d).deleted
            d += 1
        }
        return ids
    }
}
