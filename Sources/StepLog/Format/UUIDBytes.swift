import Foundation

/// A UUID as two 64-bit words (big-endian halves of the RFC 4122 bytes): cheap
/// to hash, compare and store in the index.
public struct UUIDBytes: Hashable, Sendable {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    @inline(__always)
    public init(_ uuid: UUID) {
        self = withUnsafeBytes(of: uuid.uuid) { UUIDBytes(loadingFrom: $0, at: 0) }
    }

    @inline(__always)
    public init(loadingFrom bytes: UnsafeRawBufferPointer, at offset: Int) {
        high = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        low = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
    }

    public var uuid: UUID {
        let h = high, l = low
        return UUID(uuid: (
            UInt8(truncatingIfNeeded: h >> 56), UInt8(truncatingIfNeeded: h >> 48),
            UInt8(truncatingIfNeeded: h >> 40), UInt8(truncatingIfNeeded: h >> 32),
            UInt8(truncatingIfNeeded: h >> 24), UInt8(truncatingIfNeeded: h >> 16),
            UInt8(truncatingIfNeeded: h >> 8), UInt8(truncatingIfNeeded: h),
            UInt8(truncatingIfNeeded: l >> 56), UInt8(truncatingIfNeeded: l >> 48),
            UInt8(truncatingIfNeeded: l >> 40), UInt8(truncatingIfNeeded: l >> 32),
            UInt8(truncatingIfNeeded: l >> 24), UInt8(truncatingIfNeeded: l >> 16),
            UInt8(truncatingIfNeeded: l >> 8), UInt8(truncatingIfNeeded: l)))
    }

    public var isNil: Bool { high == 0 && low == 0 }

    /// A well-mixed 64-bit hash (the index's shard and slot come from it). UUIDs
    /// from some sources are not random (time-ordered v7, derived ids), so mix.
    @inline(__always)
    public var mixedHash: UInt64 {
        var h = high ^ (low &* 0x9E37_79B9_7F4A_7C15)
        h ^= h >> 32
        h &*= 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        h &*= 0xD6E8_FEB8_6659_FD93
        h ^= h >> 32
        return h
    }
}
