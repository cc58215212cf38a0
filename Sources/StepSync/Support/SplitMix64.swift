/// SplitMix64: a small, fast, seedable generator. The mock's randomness, and
/// the benchmarks' and tests' reproducible data (same seed, same values on
/// every platform).
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in `range` by modulo (the slight bias is irrelevant for test
    /// data, and keeps the values identical on every platform, unlike
    /// `Int.random(in:using:)`, whose algorithm is not promised).
    public mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
}
