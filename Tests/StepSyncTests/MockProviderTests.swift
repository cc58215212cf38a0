import Foundation
import Testing
@testable import StepLog
@testable import StepSync

@Suite struct MockProviderTests {
    @Test func daysHaveTheSeedsCharacteristics() async throws {
        let provider = mock(days: 120)
        var weekday: [Int64] = [], weekend: [Int64] = []
        var daysWorn = 0
        for d in (testEndDay - 120)..<testEndDay {
            let samples = try await provider.getRawStepSamples(for: interval(d * day, (d + 1) * day))
            #expect(samples.allSatisfy { (10...500).contains($0.count) })
            #expect(samples.allSatisfy { (30_000...300_000).contains($0.endMilliseconds - $0.startMilliseconds) })
            #expect(zip(samples, samples.dropFirst()).allSatisfy {
                ($0.startMilliseconds, UUIDBytes($0.id).high) < ($1.startMilliseconds, UUIDBytes($1.id).high)
            }, "sorted by start, then UUID")
            // The iPhone alone has the seeds' characteristics.
            let phone = samples.filter { $0.sourceDeviceName == "Mock iPhone" }
            let steps = phone.reduce(0) { $0 + $1.count }
            #expect((50...200).contains(phone.count))
            #expect((5_000...15_000).contains(steps))
            #expect(zip(phone, phone.dropFirst()).allSatisfy { $0.startMilliseconds < $1.startMilliseconds })
            let w = ISO8601.floorDivide(d + 4, 7).1
            if w == 0 || w == 6 { weekend.append(Int64(steps)) } else { weekday.append(Int64(steps)) }
            // The Watch, when worn, between 07:00 and 22:00, mirroring most of the iPhone's walks there.
            let watch = samples.filter { $0.sourceDeviceName == "Mock Apple Watch" }
            #expect(phone.count + watch.count == samples.count)
            if !watch.isEmpty {
                daysWorn += 1
                #expect(watch.allSatisfy { $0.startMilliseconds >= d * day + 7 * 3_600_000 - 20_000 && $0.startMilliseconds < d * day + 22 * 3_600_000 + 20_000 })
                #expect(watch.count <= phone.count)
            }
        }
        // The weekday / weekend pattern: weekdays walk more on average.
        let weekdayMean: Int64 = weekday.reduce(0, +) / Int64(weekday.count)
        let weekendMean: Int64 = weekend.reduce(0, +) / Int64(weekend.count)
        #expect(weekdayMean > weekendMean + 1_000)
        #expect((60...100).contains(daysWorn), "the Watch is worn on about 70% of days: \(daysWorn) of 120")
    }

    /// The iPhone's samples are what they were before the mock had a Watch
    /// (stores and tests made then keep their meaning): a digest of their
    /// JSON over 60 days, taken from the iPhone-only mock.
    @Test func theIPhoneStreamIsUnchangedByTheWatch() async throws {
        for provider in [mock(days: 60), MockStepDataProvider(configuration: MockConfiguration(days: 60, endDay: testEndDay, watch: false))] {
            let samples = try await provider.getRawStepSamples(for: interval((testEndDay - 60) * day, testEndDay * day))
            var digest: UInt64 = 0xCBF2_9CE4_8422_2325 // FNV-1a
            var phone = 0
            for s in samples where s.sourceDeviceName == "Mock iPhone" {
                for b in SampleJSON.encode(s) { digest = (digest ^ UInt64(b)) &* 0x100_0000_01B3 }
                phone += 1
            }
            #expect(phone == 7_862 && digest == 0x572D_5F52_6161_1A98)
            #expect(provider.configuration.watch == (phone < samples.count))
        }
    }

    @Test func theWatchMakesTheRawSumOverstateTheMergedTotal() async throws {
        let provider = mock(days: 60)
        let samples = try await provider.getRawStepSamples(for: interval((testEndDay - 60) * day, testEndDay * day))
        let totals = DailyMerge.totals(SampleTable(samples), priority: .default, calendar: LocalDayCalendar(identifier: "UTC")!,
                                       days: (testEndDay - 60)...(testEndDay - 1))
        #expect(totals.sources.map(\.deviceName) == ["Mock Apple Watch", "Mock iPhone"])
        var inflated = 0
        for d in totals.days {
            #expect(d.merged <= d.raw)
            let phone = d.sources.first { $0.source.deviceName == "Mock iPhone" }?.raw ?? 0
            #expect(d.merged >= phone * 9 / 10, "the Watch's walks are the iPhone's: merged stays near the iPhone's own total")
            if d.raw > d.merged + d.merged / 4 { inflated += 1 }
        }
        #expect(inflated >= 20, "on days the Watch is worn the raw sum counts most walks twice: \(inflated) of 60 days")
    }

    @Test func aggregateIsExactlyTheSumOfRawSamplesStartingInTheInterval() async throws {
        let provider = mock(days: 90)
        var rng = SeededGenerator(seed: 9)
        let lo = (testEndDay - 95) * day, hi = (testEndDay + 3) * day
        var nonEmpty = 0
        for _ in 0..<300 {
            let a = Int64.random(in: lo..<hi, using: &rng)
            let b = Int64.random(in: a...min(hi, a + Int64.random(in: 1...40, using: &rng) * day), using: &rng)
            let raw = try await provider.getRawStepSamples(for: interval(a, b))
            let aggregate = try await provider.getAggregatedStepCount(for: interval(a, b))
            #expect(aggregate == raw.reduce(0) { $0 + $1.count })
            #expect(raw.allSatisfy { $0.startMilliseconds >= a && $0.startMilliseconds < b })
            if !raw.isEmpty { nonEmpty += 1 }
        }
        // Two empty answers agree whatever the code does: most intervals must hold samples.
        #expect(nonEmpty > 200, "\(nonEmpty) of 300 intervals held samples")
    }

    @Test func halfOpenIntervalsNeverCountASampleTwice() async throws {
        let provider = mock(days: 10)
        let samples = try await provider.getRawStepSamples(for: interval((testEndDay - 10) * day, testEndDay * day))
        let s = samples[40]
        let left = try await provider.getRawStepSamples(for: interval(s.startMilliseconds - 3_600_000, s.startMilliseconds))
        let right = try await provider.getRawStepSamples(for: interval(s.startMilliseconds, s.startMilliseconds + 1))
        #expect(!left.contains(s) && right == [s])
        let whole = try await provider.getAggregatedStepCount(for: interval((testEndDay - 10) * day, testEndDay * day))
        let split = try await provider.getAggregatedStepCount(for: interval((testEndDay - 10) * day, s.startMilliseconds))
            + provider.getAggregatedStepCount(for: interval(s.startMilliseconds, testEndDay * day))
        #expect(whole == split)
    }

    @Test func askingTwiceGivesTheSameSamplesAndUUIDs() async throws {
        let a = mock(days: 30), b = mock(days: 30)
        let range = interval((testEndDay - 30) * day, testEndDay * day)
        let first = try await a.getRawStepSamples(for: range)
        #expect(try await a.getRawStepSamples(for: range) == first)
        #expect(try await b.getRawStepSamples(for: range) == first) // a fresh provider too
        #expect(Set(first.map(\.id)).count == first.count)
        // Another seed gives other ids.
        let other = try await mock(days: 30, seed: 7).getRawStepSamples(for: range)
        #expect(Set(other.map(\.id)).isDisjoint(with: Set(first.map(\.id))))
        // UUIDs look random in every half (not a shared prefix per day).
        #expect(Set(first.prefix(50).map { UUIDBytes($0.id).high }).count == 50)
    }

    @Test func perDayScalesSamplesAndNothingExistsOutsideTheRange() async throws {
        let provider = mock(days: 5, perDay: 5_000)
        let samples = try await provider.getRawStepSamples(for: interval((testEndDay - 1) * day, testEndDay * day))
        #expect(samples.count == 5_000)
        #expect(samples.allSatisfy { (10...500).contains($0.count) })
        #expect(try await provider.getAggregatedStepCount(for: interval(0, (testEndDay - 5) * day)) == 0)
        #expect(try await provider.getAggregatedStepCount(for: interval(testEndDay * day, (testEndDay + 9) * day)) == 0)
    }

    @Test func sourceSpecParsing() throws {
        #expect(try SourceSpec.parse("mock", today: 100) == .mock(MockConfiguration(endDay: 100)))
        let spec = try SourceSpec.parse("mock:seed=7,days=10,end=2024-01-15,perDay=300,latency=5", today: 1)
        #expect(spec == .mock(MockConfiguration(seed: 7, days: 10, endDay: 19_737, samplesPerDay: 300, latencyMilliseconds: 5)))
        #expect(try SourceSpec.parse("/x/export.zip") == .export(path: "/x/export.zip"))
        for bad in ["mock:seed=x", "mock:days=0", "mock:colour=red", "mock:end=2024-13-01", "mock:seed"] {
            #expect(throws: SourceSpecError.self) { try SourceSpec.parse(bad) }
        }
        #expect(MockConfiguration(endDay: 19_737).description == "mock:seed=42,days=730,end=2024-01-15,watch=1")
        // Without the Watch: the iPhone-only mock's spelling, so its stores resume.
        #expect(try SourceSpec.parse("mock:watch=0,end=2024-01-15") == .mock(MockConfiguration(endDay: 19_737, watch: false)))
        #expect(MockConfiguration(endDay: 19_737, watch: false).description == "mock:seed=42,days=730,end=2024-01-15")
        #expect(MockConfiguration(endDay: 19_737, samplesPerDay: 10).description == "mock:seed=42,days=730,end=2024-01-15,perDay=10")
        #expect(throws: SourceSpecError.self) { try SourceSpec.parse("mock:perDay=10,watch=1") }
        #expect(throws: SourceSpecError.self) { try SourceSpec.parse("mock:watch=2") }
    }
}
