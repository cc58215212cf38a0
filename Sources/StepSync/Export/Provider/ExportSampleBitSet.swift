/// One bit per sample of an export, by its index in the provider's order:
/// which samples a store already holds (1.25 MB for 10M samples).
struct ExportSampleBitSet: Sendable {
    private var words: [UInt64]

    init(count: Int) { words = [UInt64](repeating: 0, count: (count + 63) / 64) }

    mutating func insert(_ i: Int) { words[i >> 6] |= 1 << UInt64(i & 63) }

    func contains(_ i: Int) -> Bool { words[i >> 6] & (1 << UInt64(i & 63)) != 0 }
}
