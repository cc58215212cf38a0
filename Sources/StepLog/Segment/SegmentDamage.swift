/// What stopped a segment scan before the end of the file.
public enum SegmentDamage: Hashable, Sendable, CustomStringConvertible {
    case truncatedHeader(available: Int)
    case truncatedPayload(declared: Int, available: Int)
    case impossibleLength(UInt32)
    case checksumMismatch(stored: UInt32, computed: UInt32)

    public var description: String {
        switch self {
        case .truncatedHeader(let n): "record header cut short (\(n) of \(RecordFrame.headerSize) bytes)"
        case .truncatedPayload(let declared, let available): "record payload cut short (\(available) of \(declared) bytes)"
        case .impossibleLength(let n): "impossible record length \(n)"
        case .checksumMismatch(let stored, let computed):
            "checksum mismatch (stored 0x\(String(stored, radix: 16)), computed 0x\(String(computed, radix: 16)))"
        }
    }
}

extension SegmentDamage {
    /// The damage a frame decode reported, or nil for a good record.
    public init?(_ decoded: RecordFrame.Decoded) {
        switch decoded {
        case .record: return nil
        case .truncatedHeader(let n): self = .truncatedHeader(available: n)
        case .truncatedPayload(let declared, let available): self = .truncatedPayload(declared: declared, available: available)
        case .impossibleLength(let n): self = .impossibleLength(n)
        case .checksumMismatch(let stored, let computed): self = .checksumMismatch(stored: stored, computed: computed)
        }
    }
}
