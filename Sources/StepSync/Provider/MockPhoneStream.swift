import StepLog

/// The mock's iPhone: one day's samples from (seed, day) alone, as the mock
/// has always made them (its UUIDs and values never change: stores and tests
/// depend on them).
///
/// The day's total is drawn first (weekdays 7,000–15,000 steps, weekends
/// 5,000–10,000; with `perDay`, about 75 steps a sample), then split over the
/// day's samples so each has 10–500 steps; so `total` costs a few random
/// draws and always equals the sum of the samples `samples` makes. Samples
/// are spread over 06:00–23:00 UTC (the whole day past 400 a day), start at
/// strictly increasing instants and last 30 s–5 min.
enum MockPhoneStream {
    static let bundleId = "com.apple.health.mock"
    static let deviceName = "Mock iPhone"

    private struct Draws {
        var rng: SplitMix64
        var total: Int
        var count: Int
    }

    private static func draws(seed: UInt64, day: Int64, samplesPerDay: Int?) -> Draws {
        var rng = SplitMix64(seed: seed &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: day) &* 0xD6E8_FEB8_6659_FD93)
        let weekday = Int(ISO8601.floorDivide(day + 4, 7).1) // 0 = Sunday; 1970-01-01 was a Thursday
        let weekend = weekday == 0 || weekday == 6
        if let perDay = samplesPerDay {
            let count = max(1, perDay)
            return Draws(rng: rng, total: count * rng.next(in: 40...110), count: count)
        }
        let total = weekend ? rng.next(in: 5_000...10_000) : rng.next(in: 7_000...15_000)
        return Draws(rng: rng, total: total, count: rng.next(in: 50...200))
    }

    /// The day's total steps, without generating its samples.
    static func total(seed: UInt64, day: Int64, samplesPerDay: Int?) -> Int64 {
        Int64(draws(seed: seed, day: day, samplesPerDay: samplesPerDay).total)
    }

    /// The day's samples, by strictly increasing start.
    static func samples(seed: UInt64, day: Int64, samplesPerDay: Int?) -> [StepSample] {
        var d = draws(seed: seed, day: day, samplesPerDay: samplesPerDay)
        let n = d.count
        // Split the total: 10 steps each, the rest by random weights, capped at 500.
        var counts = [Int](repeating: 10, count: n)
        var rest = d.total - 10 * n
        var weights = [Int](repeating: 0, count: n)
        var weightSum = 0
        for i in 0..<n { weights[i] = d.rng.next(in: 1...1000); weightSum += weights[i] }
        let share = rest
        for i in 0..<n {
            let extra = min(490, share * weights[i] / weightSum)
            counts[i] += extra
            rest -= extra
        }
        var i = d.rng.next(in: 0...(n - 1))
        while rest > 0 {
            if counts[i] < 500 { counts[i] += 1; rest -= 1 }
            i = (i + 1) % n
        }
        // Times.
        let dayStart = day * MockDay.millisecondsPerDay
        let (windowStart, windowLength): (Int64, Int64) = n <= 400 ? (6 * 3_600_000, 17 * 3_600_000) : (0, MockDay.millisecondsPerDay)
        let slot = windowLength / Int64(n)
        var samples: [StepSample] = []
        samples.reserveCapacity(n)
        for k in 0..<n {
            let jitterRange = max(Int64(0), slot - 30_000)
            var jitter = jitterRange > 0 ? Int64(d.rng.next(in: 0...Int(jitterRange))) : 0
            if slot >= 2_000 { jitter -= jitter % 1000 } // whole seconds, like real data, when there is room
            let start = dayStart + windowStart + Int64(k) * slot + jitter
            let duration = Int64(d.rng.next(in: 30...300)) * 1000
            let id = DerivedUUID.make(DerivedUUID.mockSampleDomain, seed, UInt64(bitPattern: day), UInt64(k))
            samples.append(StepSample(id: id, startMilliseconds: start, endMilliseconds: start + duration, count: counts[k],
                                      sourceBundleId: bundleId, sourceDeviceName: deviceName, origin: .mock))
        }
        return samples
    }
}
