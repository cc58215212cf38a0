import Foundation
import StepLog

/// Deterministic UUIDs for things that have no id of their own (mock samples,
/// layering intervals): RFC 9562 version 8 ("custom") UUIDs whose 122 free
/// bits come from mixing the inputs, so the same inputs always give the same id.
public enum DerivedUUID {
    /// A UUID from a domain tag and up to three numbers: every input is
    /// absorbed into a 64-bit state, then two outputs are squeezed from it, so
    /// every bit of the UUID depends on every input.
    public static func make(_ domain: UInt64, _ a: UInt64, _ b: UInt64 = 0, _ c: UInt64 = 0) -> UUID {
        var state = finalize(domain ^ 0x5354_4550_4C4F_4721)
        state = finalize(state ^ a)
        state = finalize(state &+ b)
        state = finalize(state ^ (c &* 0x9E37_79B9_7F4A_7C15))
        var high = finalize(state ^ 0x0123_4567_89AB_CDEF)
        var low = finalize(state &+ 0x0F1E_2D3C_4B5A_6978)
        high = (high & ~0xF000) | 0x8000          // version 8
        low = (low & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000 // RFC variant
        return UUIDBytes(high: high, low: low).uuid
    }

    /// The SplitMix64 finalizer: a bijective 64-bit mix.
    @inline(__always)
    private static func finalize(_ x: UInt64) -> UInt64 {
        var z = x &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Domain tags (never renumber: ids in existing stores depend on them).
    public static let mockSampleDomain: UInt64 = 1
    public static let intervalDomain: UInt64 = 2
    public static let mockWatchSampleDomain: UInt64 = 3
    public static let mockChurnSampleDomain: UInt64 = 4
}
