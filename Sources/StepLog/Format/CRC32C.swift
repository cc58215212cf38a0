import CStepLogSupport

/// CRC-32C (Castagnoli), hardware-accelerated where the CPU allows, and the
/// LevelDB-style mask applied to checksums stored next to the data they cover
/// (a CRC of data that itself contains CRCs is weak; masking avoids that).
public enum CRC32C {
    /// CRC-32C of `bytes`.
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        extend(0, bytes)
    }

    /// CRC-32C of `bytes`.
    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0) }
    }

    /// Continues `crc` over `bytes`: `extend(checksum(a), b) == checksum(a + b)`.
    public static func extend(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return steplog_crc32c_extend(crc, base, bytes.count)
    }

    /// The stored form of a checksum.
    @inline(__always)
    public static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ FormatConstants.checksumMaskDelta
    }

    /// Inverse of `mask`.
    @inline(__always)
    public static func unmask(_ masked: UInt32) -> UInt32 {
        let rotated = masked &- FormatConstants.checksumMaskDelta
        return (rotated >> 17) | (rotated << 15)
    }

    /// True when the running CPU computes CRC-32C in hardware.
    public static var isHardwareAccelerated: Bool { steplog_crc32c_is_hardware() != 0 }
}
