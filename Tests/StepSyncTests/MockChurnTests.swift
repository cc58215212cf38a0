import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// `mock:…,churn=P`: deterministic, of the three kinds, consistent from one
/// day to the next, and an ingest of the next day leaves exactly its samples.
@Suite struct MockChurnTests {
    static func config(days: Int, end: Int64, churn: Double, seed: UInt64 = 42, watch: Bool = true) -> MockConfiguration {
        MockConfiguration(seed: seed, days: days, endDay: end, watch: watch, churn: churn)
    }

    static func all(_ p: MockStepDataProvider) async throws -> [StepSample] {
        let c = p.configuration
        return try await p.getRawStepSamples(for: interval(c.firstDay * day, c.endDay * day))
    }

    @Test func parsesAndSpellsChurn() throws {
        guard case .mock(let c) = try SourceSpec.parse("mock:days=3,end=2026-11-21,churn=0.05") else { Issue.record("not a mock"); return }
        #expect(c.churn == 0.05)
        #expect(c.description == "mock:seed=42,days=3,end=2026-11-21,watch=1,churn=0.05")
        guard case .mock(let plain) = try SourceSpec.parse("mock:days=3,end=2026-11-21") else { return }
        #expect(plain.description == "mock:seed=42,days=3,end=2026-11-21,watch=1") // identity unchanged without churn
        for bad in ["churn=2", "churn=-0.1", "churn=x", "churn=nan"] {
            #expect(throws: SourceSpecError.self) { try SourceSpec.parse("mock:\(bad)") }
        }
        do { _ = try SourceSpec.parse("mock:churn=2"); Issue.record("accepted churn=2") } catch {
            #expect("\(error)".contains("churn must be a fraction in 0...1, found '2'"))
        }
    }

    @Test func churnIsDeterministicAndOfTheThreeKinds() async throws {
        let end = testEndDay + 1
        let a = MockStepDataProvider(configuration: Self.config(days: 61, end: end, churn: 0.05))
        let b = MockStepDataProvider(configuration: Self.config(days: 61, end: end, churn: 0.05))
        let plain = MockStepDataProvider(configuration: Self.config(days: 61, end: end, churn: 0))
        let samplesA = try await Self.all(a)
        #expect(samplesA == (try await Self.all(b)))
        #expect(a.churnedIDs() == b.churnedIDs())
        #expect(plain.churnedIDs().isEmpty)
        let other = MockStepDataProvider(configuration: Self.config(days: 61, end: end, churn: 0.05, seed: 7))
        #expect(Set(other.churnedIDs()).isDisjoint(with: a.churnedIDs()))

        let before = try await Self.all(plain)
        let beforeByID = Dictionary(uniqueKeysWithValues: before.map { ($0.id, $0) })
        let deleted = Set(a.churnedIDs())
        let served = Dictionary(uniqueKeysWithValues: samplesA.map { ($0.id, $0) })
        #expect(deleted.isDisjoint(with: served.keys))            // the contract: no deleted id is served
        #expect(deleted.isSubset(of: beforeByID.keys))
        // Exactly: the un-churned samples minus the deleted, plus the new ones.
        let kept = Set(beforeByID.keys).subtracting(deleted)
        let added = Set(served.keys).subtracting(beforeByID.keys)
        #expect(Set(served.keys) == kept.union(added))
        #expect(served.filter { kept.contains($0.key) }.allSatisfy { beforeByID[$0.key] == $0.value })
        // The fraction: P of the older samples churned, give or take.
        let older = before.filter { $0.startMilliseconds < (end - 1) * day }.count
        let churnedOriginals = Double(deleted.count)
        #expect(churnedOriginals > 0.03 * Double(older) && churnedOriginals < 0.10 * Double(older), "\(deleted.count) of \(older)")
        // The last day is not older: untouched.
        let lastDay = interval((end - 1) * day, end * day)
        #expect(try await a.getRawStepSamples(for: lastDay) == (try await plain.getRawStepSamples(for: lastDay)))
        // The three kinds: a new sample that is the sum of two deleted ones
        // spanning both; one with a deleted one's exact span and another count;
        // deletions with neither.
        var consolidations = 0, replacements = 0
        var explained = Set<UUID>()
        let deletedSamples = deleted.map { beforeByID[$0]! }
        for n in added.map({ served[$0]! }) {
            let sameStart = deletedSamples.filter { $0.startMilliseconds == n.startMilliseconds && $0.sourceDeviceName == n.sourceDeviceName }
            if let r = sameStart.first(where: { $0.endMilliseconds == n.endMilliseconds && $0.count != n.count }) {
                replacements += 1
                explained.insert(r.id)
            } else if let first = sameStart.first,
                      let second = deletedSamples.first(where: { $0.sourceDeviceName == n.sourceDeviceName && $0.startMilliseconds > first.startMilliseconds
                          && first.count + $0.count == n.count && max(first.endMilliseconds, $0.endMilliseconds) == n.endMilliseconds }) {
                consolidations += 1
                explained.formUnion([first.id, second.id])
            }
        }
        #expect(consolidations + replacements == added.count)
        #expect(consolidations > 10 && replacements > 5 && deleted.count - explained.count > 5,
                "\(consolidations) consolidations, \(replacements) replacements, \(deleted.count - explained.count) deletions")
        // The aggregate is still the sum of the raw samples, over any interval.
        var rng = SeededGenerator(seed: 5)
        for _ in 0..<50 {
            let from = (end - 61) * day + Int64(rng.next(in: 0...(60 * 86_400))) * 1000
            let to = from + Int64(rng.next(in: 1...(5 * 86_400))) * 1000
            let raw = try await a.getRawStepSamples(for: interval(from, to)).reduce(0) { $0 + $1.count }
            #expect(try await a.getAggregatedStepCount(for: interval(from, to)) == raw)
        }
        #expect(try await a.getAggregatedStepCount(for: interval((end - 61) * day, end * day)) == samplesA.reduce(0) { $0 + $1.count })
    }

    @Test func tomorrowsChurnKeepsTodaysAndAddsTheNewestDays() {
        let today = MockStepDataProvider(configuration: Self.config(days: 40, end: testEndDay, churn: 0.1))
        let tomorrow = MockStepDataProvider(configuration: Self.config(days: 41, end: testEndDay + 1, churn: 0.1))
        let a = Set(today.churnedIDs()), b = Set(tomorrow.churnedIDs())
        #expect(a.isStrictSubset(of: b))
        #expect(MockStepDataProvider(configuration: Self.config(days: 40, end: testEndDay, churn: 0.1, watch: false))
            .churnedIDs().allSatisfy { a.contains($0) })
    }

    @Test func ingestingTheNextDayWithChurnLeavesExactlyItsSamples() async throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.sub("store"))
        defer { try? store.close() }
        let first = MockStepDataProvider(configuration: Self.config(days: 30, end: testEndDay, churn: 0))
        try await ingestWithDeletions(first, into: store)
        let second = MockStepDataProvider(configuration: Self.config(days: 31, end: testEndDay + 1, churn: 0.05))
        let r = try await ingestWithDeletions(second, into: store)
        #expect(r.deleted.deleted == second.churnedIDs().count && r.deleted.deleted > 100)
        let wanted = try await Self.all(second)
        let live = try liveSamples(store)
        #expect(live == Dictionary(uniqueKeysWithValues: wanted.map { ($0.id, $0) }))
        // The day after, with the same churn: exactly that day's mock again.
        let third = MockStepDataProvider(configuration: Self.config(days: 32, end: testEndDay + 2, churn: 0.05))
        let r3 = try await ingestWithDeletions(third, into: store)
        #expect(r3.deleted.alreadyDeleted == r.deleted.deleted && r3.deleted.deleted > 0)
        #expect(try liveSamples(store) == Dictionary(uniqueKeysWithValues: try await Self.all(third).map { ($0.id, $0) }))
        #expect(live.values.allSatisfy { $0.origin == .mock })
    }
}
