import Foundation
import StepLog

/// One day of mock data, generated from the configuration and the day alone:
/// the iPhone's samples (`MockPhoneStream`) and, unless `watch=0` or
/// `perDay`, the Apple Watch's (`MockWatchStream`), together sorted by start
/// then UUID, with running sums so that the steps of the samples starting in
/// any interval of the day cost two binary searches. With `churn`, a day
/// before `end - 1` is churned (`MockChurn`), each stream on its own.
struct MockDay {
    let day: Int64
    let samples: [StepSample]
    /// The un-churned mock's UUIDs that churn removed from this day.
    let deleted: [UUID]
    /// Sample starts, ascending.
    let starts: [Int64]
    /// prefix[i] = steps of samples[0..<i].
    let prefix: [Int64]

    static let millisecondsPerDay: Int64 = 86_400_000

    /// The day's total steps; without generating samples when there is no Watch.
    static func total(_ configuration: MockConfiguration, day: Int64) -> Int64 {
        guard configuration.watch || MockChurn.churns(day: day, endDay: configuration.endDay, probability: configuration.churn) else {
            return MockPhoneStream.total(seed: configuration.seed, day: day, samplesPerDay: configuration.samplesPerDay)
        }
        return MockDay(configuration, day: day).prefix.last!
    }

    init(_ configuration: MockConfiguration, day: Int64) {
        let phone = MockPhoneStream.samples(seed: configuration.seed, day: day, samplesPerDay: configuration.samplesPerDay)
        var samples = phone
        var deleted: [UUID] = []
        let churns = MockChurn.churns(day: day, endDay: configuration.endDay, probability: configuration.churn)
        if churns {
            let churned = MockChurn.apply(phone, stream: .phone, seed: configuration.seed, day: day, probability: configuration.churn)
            samples = churned.samples
            deleted = churned.deleted
        }
        if configuration.watch {
            var watch = MockWatchStream.samples(seed: configuration.seed, day: day, phone: phone)
            if churns {
                let churned = MockChurn.apply(watch, stream: .watch, seed: configuration.seed, day: day, probability: configuration.churn)
                watch = churned.samples
                deleted += churned.deleted
            }
            samples += watch
        }
        if configuration.watch || churns {
            samples.sort { a, b in
                if a.startMilliseconds != b.startMilliseconds { return a.startMilliseconds < b.startMilliseconds }
                let x = UUIDBytes(a.id), y = UUIDBytes(b.id)
                return (x.high, x.low) < (y.high, y.low)
            }
        }
        var starts: [Int64] = []
        starts.reserveCapacity(samples.count)
        var prefix: [Int64] = [0]
        prefix.reserveCapacity(samples.count + 1)
        for s in samples {
            starts.append(s.startMilliseconds)
            prefix.append(prefix.last! + Int64(s.count))
        }
        self.day = day
        self.samples = samples
        self.deleted = deleted
        self.starts = starts
        self.prefix = prefix
    }

    /// Index of the first sample starting at or after `ms`.
    func lowerBound(_ ms: Int64) -> Int {
        var lo = 0, hi = starts.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if starts[mid] < ms { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Steps of samples starting in [from, to).
    func steps(from: Int64, to: Int64) -> Int64 {
        prefix[lowerBound(to)] - prefix[lowerBound(from)]
    }

    /// Samples starting in [from, to).
    func samples(from: Int64, to: Int64) -> ArraySlice<StepSample> {
        samples[lowerBound(from)..<lowerBound(to)]
    }
}
