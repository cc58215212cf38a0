/// MurmurHash3, x64 128-bit variant (Austin Appleby's public-domain design),
/// written from the algorithm's description: 16-byte little-endian blocks
/// mixed into two 64-bit lanes, a tail, and `fmix64` finalization.
///
/// Not cryptographic. Used where a well-distributed, stable 128-bit digest of
/// bytes is needed: export record identities (`ExportRecordIdentity`) and the
/// export's `sourceIdentity`. Streaming: `update` may be called any number of
/// times; the digest equals that of the concatenated bytes. The output of this
/// function is part of the identity of stored samples: never change it.
struct MurmurHash3x64 {
    private static let c1: UInt64 = 0x87C3_7B91_1142_53D5
    private static let c2: UInt64 = 0x4CF5_AD43_2745_937F

    private var h1: UInt64
    private var h2: UInt64
    private var length = 0
    /// Bytes not yet forming a whole 16-byte block (at most 15 are kept).
    private var pending: (UInt64, UInt64) = (0, 0)
    private var pendingCount = 0

    init(seed: UInt64 = 0) {
        h1 = seed
        h2 = seed
    }

    /// The 128-bit digest of `bytes` as (h1, h2).
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> (UInt64, UInt64) {
        var hasher = MurmurHash3x64(seed: seed)
        hasher.update(bytes)
        return hasher.finalize()
    }

    static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> (UInt64, UInt64) {
        bytes.withUnsafeBytes { hash($0, seed: seed) }
    }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard var base = bytes.baseAddress, bytes.count > 0 else { return }
        var count = bytes.count
        length += count
        // Complete a pending partial block first.
        if pendingCount > 0 {
            let take = min(16 - pendingCount, count)
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.advanced(by: pendingCount).copyMemory(from: base, byteCount: take)
            }
            pendingCount += take
            base += take
            count -= take
            guard pendingCount == 16 else { return }
            mixBlock(UInt64(littleEndian: pending.0), UInt64(littleEndian: pending.1))
            pending = (0, 0)
            pendingCount = 0
        }
        while count >= 16 {
            let k1 = UInt64(littleEndian: base.loadUnaligned(as: UInt64.self))
            let k2 = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            mixBlock(k1, k2)
            base += 16
            count -= 16
        }
        if count > 0 {
            withUnsafeMutableBytes(of: &pending) { block in
                block.baseAddress!.copyMemory(from: base, byteCount: count)
            }
            pendingCount = count
        }
    }

    mutating func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    @inline(__always)
    private mutating func mixBlock(_ block1: UInt64, _ block2: UInt64) {
        var k1 = block1, k2 = block2
        k1 &*= Self.c1; k1 = rotl(k1, 31); k1 &*= Self.c2; h1 ^= k1
        h1 = rotl(h1, 27); h1 &+= h2; h1 = h1 &* 5 &+ 0x52DC_E729
        k2 &*= Self.c2; k2 = rotl(k2, 33); k2 &*= Self.c1; h2 ^= k2
        h2 = rotl(h2, 31); h2 &+= h1; h2 = h2 &* 5 &+ 0x3849_5AB5
    }

    /// The digest. The tail (fewer than 16 bytes) is mixed without the block
    /// rounds, as the algorithm specifies, then the length and `fmix64`.
    func finalize() -> (UInt64, UInt64) {
        var h1 = self.h1, h2 = self.h2
        if pendingCount > 0 {
            // Bytes past pendingCount are zero, so the little-endian lanes hold
            // exactly the tail bytes the reference's switch would gather.
            var k1 = UInt64(littleEndian: pending.0)
            var k2 = UInt64(littleEndian: pending.1)
            if pendingCount > 8 {
                k2 &*= Self.c2; k2 = rotl(k2, 33); k2 &*= Self.c1; h2 ^= k2
            }
            k1 &*= Self.c1; k1 = rotl(k1, 31); k1 &*= Self.c2; h1 ^= k1
        }
        h1 ^= UInt64(length)
        h2 ^= UInt64(length)
        h1 &+= h2
        h2 &+= h1
        h1 = fmix(h1)
        h2 = fmix(h2)
        h1 &+= h2
        h2 &+= h1
        return (h1, h2)
    }

    @inline(__always)
    private func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    @inline(__always)
    private func fmix(_ value: UInt64) -> UInt64 {
        var k = value
        k ^= k >> 33
        k &*= 0xFF51_AFD7_ED55_8CCD
        k ^= k >> 33
        k &*= 0xC4CE_B9FE_1A85_EC53
        k ^= k >> 33
        return k
    }
}
