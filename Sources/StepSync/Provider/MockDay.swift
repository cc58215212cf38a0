import StepLog

/// One day of mock data, generated from the configuration and the day alone:
/// the iPhone's samples (`MockPhoneStream`) and, unless `watch=0` or
/// `perDay`, the Apple Watch's (`MockWatchStream`), together sorted by start
/// then UUID, with running sums so that the steps of the samples starting in
/// any interval of the day cost two binary searches.
struct MockDay {
    let day: Int64
    let samples: [StepSample]
    /// Sample starts, ascending.
    let starts: [Int64]
    /// prefix[i] = steps of samples[0..<i].
    let prefix: [Int64]

    static let millisecondsPerDay: Int64 = 86_400_000

    /// The day's total steps; without generating samples when there is no Watch.
    static func total(_ configuration: MockConfiguration, day: Int64) -> Int64 {
        guard configuration.watch else {
            return MockPhoneStream.total(seed: configuration.seed, day: day, samplesPerDay: configuration.samplesPerDay)
        }
        return MockDay(configuration, day: day).prefix.last!
    }

    init(_ configuration: MockConfiguration, day: Int64) {
        var samples = MockPhoneStream.samples(seed: configuration.seed, day: day, samplesPerDay: configuration.samplesPerDay)
        if configuration.watch {
            samples += MockWatchStream.samples(seed: configuration.seed, day: day, phone: samples)
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
