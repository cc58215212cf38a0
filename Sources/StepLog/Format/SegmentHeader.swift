/// The fixed 40-byte header at the start of every segment file (layout in
/// `FormatConstants` and docs/FORMAT.md).
public struct SegmentHeader: Hashable, Sendable {
    public var version: UInt16 = FormatConstants.formatVersion
    public var flags: UInt16 = 0
    public var sequence: UInt64
    /// Log position of the first byte of the file.
    public var basePosition: UInt64
    /// For compaction outputs, the highest sequence number this compaction replaces.
    public var compactedThrough: UInt64 = 0

    public init(sequence: UInt64, basePosition: UInt64, flags: UInt16 = 0, compactedThrough: UInt64 = 0) {
        self.sequence = sequence
        self.basePosition = basePosition
        self.flags = flags
        self.compactedThrough = compactedThrough
    }

    public var isCompactionOutput: Bool { flags & FormatConstants.segmentFlagCompactionOutput != 0 }
    public var isCompactionFinal: Bool { flags & FormatConstants.segmentFlagCompactionFinal != 0 }

    /// The 40 header bytes.
    public func encoded() -> [UInt8] {
        let buffer = WriteBuffer(capacity: FormatConstants.segmentHeaderSize)
        buffer.append(FormatConstants.segmentMagic)
        buffer.append(version)
        buffer.append(flags)
        buffer.append(sequence)
        buffer.append(basePosition)
        buffer.append(compactedThrough)
        let crc = CRC32C.checksum(buffer.bytes)
        buffer.append(CRC32C.mask(crc))
        return Array(buffer.bytes)
    }

    /// Why `bytes` is not a valid header.
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case tooShort(Int)
        case badMagic
        case checksumMismatch
        case unsupportedVersion(UInt16)

        public var description: String {
            switch self {
            case .tooShort(let n): "segment header is incomplete (\(n) of \(FormatConstants.segmentHeaderSize) bytes)"
            case .badMagic: "not a StepLog segment (bad magic)"
            case .checksumMismatch: "segment header checksum mismatch"
            case .unsupportedVersion(let v): "segment format version \(v) is not supported (this build reads version \(FormatConstants.formatVersion))"
            }
        }
    }

    /// Decodes the header at the start of `bytes`.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Problem> {
        guard bytes.count >= FormatConstants.segmentHeaderSize else { return .failure(.tooShort(bytes.count)) }
        for (i, m) in FormatConstants.segmentMagic.enumerated() where bytes[i] != m {
            return .failure(.badMagic)
        }
        var reader = ByteReader(bytes, offset: FormatConstants.headerVersionOffset)
        let version = reader.readUInt16()!
        let flags = reader.readUInt16()!
        let sequence = reader.readUInt64()!
        let base = reader.readUInt64()!
        let through = reader.readUInt64()!
        let stored = reader.readUInt32()!
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<FormatConstants.headerChecksumOffset]))
        guard CRC32C.unmask(stored) == computed else { return .failure(.checksumMismatch) }
        guard version == FormatConstants.formatVersion else { return .failure(.unsupportedVersion(version)) }
        return .success(SegmentHeader(sequence: sequence, basePosition: base, flags: flags, compactedThrough: through))
    }
}
