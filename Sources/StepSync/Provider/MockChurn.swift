import Foundation
import StepLog

/// The mock's churn (`churn=P`): what Health does to older samples between two
/// days, so the pipeline's deletions are testable without an export.
///
/// Applies to the samples of every day before `end - 1` — the days the mock
/// served one day earlier — of each stream (iPhone, Watch) on its own. Each
/// sample is churned with probability P, decided from (seed, stream, day,
/// index) alone, never from `end`: the mock at `end=E+1,churn=P` churns
/// exactly the samples the mock at `end=E,churn=P` churned, plus some of day
/// `E-1`. A churned sample becomes, by a second draw:
/// - **consolidated** (2 in 4): it and the stream's next sample become one new
///   sample spanning both, with the sum of their counts; both originals are
///   deleted (the next sample is then not churned on its own);
/// - **deleted** (1 in 4): gone;
/// - **replaced** (1 in 4): a new UUID, the same span, a different count (as
///   an app saving a higher `HKMetadataKeySyncVersion` does).
/// New samples get UUIDs in their own domain from (seed, stream, day, index,
/// kind), so they never collide with the un-churned mock's.
enum MockChurn {
    /// What churning one day's stream did.
    struct Result {
        var samples: [StepSample]
        /// UUIDs the un-churned mock served that no longer exist.
        var deleted: [UUID]
    }

    enum Stream: UInt64 { case phone = 1, watch = 2 }

    /// Whether a day's samples are "older" and churned by the mock at `endDay`.
    static func churns(day: Int64, endDay: Int64, probability: Double) -> Bool {
        probability > 0 && day < endDay - 1
    }

    static func apply(_ samples: [StepSample], stream: Stream, seed: UInt64, day: Int64, probability: Double) -> Result {
        var result = Result(samples: [], deleted: [])
        result.samples.reserveCapacity(samples.count)
        let threshold = UInt64(min(1, max(0, probability)) * 9_007_199_254_740_992) // 2^53
        var k = 0
        while k < samples.count {
            let original = samples[k]
            var rng = SplitMix64(seed: mix(seed, stream.rawValue, UInt64(bitPattern: day), UInt64(k)))
            guard rng.next() >> 11 < threshold else {
                result.samples.append(original)
                k += 1
                continue
            }
            let kind = rng.next(in: 0...3)
            func newID(_ kindCode: UInt64) -> UUID {
                DerivedUUID.make(DerivedUUID.mockChurnSampleDomain, seed,
                                 UInt64(bitPattern: day) << 8 | stream.rawValue << 4 | kindCode, UInt64(k))
            }
            if kind <= 1, k + 1 < samples.count {
                let next = samples[k + 1]
                result.samples.append(StepSample(id: newID(1), startMilliseconds: original.startMilliseconds,
                                                 endMilliseconds: max(original.endMilliseconds, next.endMilliseconds),
                                                 count: original.count + next.count, sourceBundleId: original.sourceBundleId,
                                                 sourceDeviceName: original.sourceDeviceName, origin: original.origin))
                result.deleted.append(original.id)
                result.deleted.append(next.id)
                k += 2
                continue
            }
            if kind == 3 {
                var replacement = original
                replacement.id = newID(3)
                let delta = rng.next(in: 1...20)
                replacement.count = original.count > 30 ? original.count - delta : original.count + delta
                result.samples.append(replacement)
                result.deleted.append(original.id)
            } else { // 2, or a consolidation with no next sample: deleted
                result.deleted.append(original.id)
            }
            k += 1
        }
        return result
    }

    private static func mix(_ seed: UInt64, _ stream: UInt64, _ day: UInt64, _ index: UInt64) -> UInt64 {
        var x = seed ^ 0x4348_5552_4E00_0000
        x = x &* 0x9E37_79B9_7F4A_7C15 ^ stream
        x = x &* 0xBF58_476D_1CE4_E5B9 ^ day
        x = x &* 0x94D0_49BB_1331_11EB ^ index
        return x &* 0xD6E8_FEB8_6659_FD93
    }
}
