/// Segment file names: the sequence number zero-padded to 12 digits, then ".log".
public enum SegmentName {
    public static func fileName(sequence: UInt64) -> String {
        let digits = String(sequence)
        let pad = max(0, FormatConstants.segmentNameDigits - digits.count)
        return String(repeating: "0", count: pad) + digits + "." + FormatConstants.segmentExtension
    }

    /// The sequence number of a segment file name, or nil for other names.
    public static func sequence(of name: String) -> UInt64? {
        sequence(of: name, extension: FormatConstants.segmentExtension)
    }

    /// The sequence number of an index snapshot file name ("000000000001.hint").
    public static func snapshotSequence(of name: String) -> UInt64? {
        sequence(of: name, extension: FormatConstants.snapshotExtension)
    }

    public static func snapshotFileName(sequence: UInt64) -> String {
        let log = fileName(sequence: sequence)
        return String(log.dropLast(FormatConstants.segmentExtension.count)) + FormatConstants.snapshotExtension
    }

    private static func sequence(of name: String, extension ext: String) -> UInt64? {
        let suffix = "." + ext
        guard name.hasSuffix(suffix) else { return nil }
        let stem = name.dropLast(suffix.count)
        guard stem.count >= FormatConstants.segmentNameDigits, stem.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(stem)
    }
}
