/// The digest of a set of samples: how many, and the sum of their content
/// hashes mod 2^64. It does not depend on order, and the union of two sets has
/// the sum of their digests.
public struct SamplesDigest: Hashable, Sendable {
    public var count = 0
    public var sum: UInt64 = 0

    public init(count: Int = 0, sum: UInt64 = 0) {
        self.count = count
        self.sum = sum
    }

    /// The digest as the server spells it (count, 16 hex digits); nil when `hex` is not one.
    public init?(count: Int, hex: String) {
        guard hex.utf8.count == 16, let sum = UInt64(hex, radix: 16) else { return nil }
        self.init(count: count, sum: sum)
    }

    public mutating func add(_ hash: UInt64) {
        count += 1
        sum = sum &+ hash
    }

    public mutating func add(_ other: SamplesDigest) {
        count += other.count
        sum = sum &+ other.sum
    }

    /// 16 lowercase hex digits, as the server writes a hash or a digest.
    public static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
