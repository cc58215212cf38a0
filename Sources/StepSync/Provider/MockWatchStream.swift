import StepLog

/// The mock's Apple Watch, worn on some days: while it is on the wrist it
/// records most of the walks the iPhone records, as real pairs do — its own
/// sample for the same walk, a few seconds off, a little longer or shorter,
/// with a few more or fewer steps. So on those days the raw sum counts those
/// walks twice and the merge (docs/TOTALS.md) counts them once; outside the
/// wearing hours and for walks the Watch missed, the iPhone fills the gaps.
///
/// Drawn from its own generator (seed, day), never from the iPhone's, so the
/// iPhone's samples stay exactly what they were. Per day: worn with
/// probability 70%, from 07:00–10:00 to 18:00–22:00 UTC; each iPhone sample
/// starting in that window is mirrored with probability 85%: start ±20 s,
/// duration −30…+60 s (kept within 30 s–5 min), steps ×0.95–1.20 (kept within
/// 10–500). Starts stay inside the day, so the day still holds exactly the
/// samples that start in it.
enum MockWatchStream {
    static let bundleId = MockPhoneStream.bundleId
    static let deviceName = "Mock Apple Watch"

    static func samples(seed: UInt64, day: Int64, phone: [StepSample]) -> [StepSample] {
        var rng = SplitMix64(seed: (seed ^ 0x5741_5443_4821_0000) &* 0xBF58_476D_1CE4_E5B9 ^ UInt64(bitPattern: day) &* 0x94D0_49BB_1331_11EB)
        guard rng.next(in: 0...99) < 70 else { return [] }
        let dayStart = day * MockDay.millisecondsPerDay
        let wornFrom = dayStart + Int64(7 * 3600 + rng.next(in: 0...(3 * 3600))) * 1000
        let wornUntil = dayStart + Int64(18 * 3600 + rng.next(in: 0...(4 * 3600))) * 1000
        var samples: [StepSample] = []
        for (k, p) in phone.enumerated() where p.startMilliseconds >= wornFrom && p.startMilliseconds < wornUntil {
            guard rng.next(in: 0...99) < 85 else { continue }
            let start = p.startMilliseconds + Int64(rng.next(in: -20...20)) * 1000
            let duration = min(300_000, max(30_000, p.endMilliseconds - p.startMilliseconds + Int64(rng.next(in: -30...60)) * 1000))
            let count = min(500, max(10, p.count * rng.next(in: 95...120) / 100))
            let id = DerivedUUID.make(DerivedUUID.mockWatchSampleDomain, seed, UInt64(bitPattern: day), UInt64(k))
            samples.append(StepSample(id: id, startMilliseconds: start, endMilliseconds: start + duration, count: count,
                                      sourceBundleId: bundleId, sourceDeviceName: deviceName, origin: .mock))
        }
        return samples
    }
}
