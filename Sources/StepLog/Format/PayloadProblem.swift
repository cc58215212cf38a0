/// Why a checksummed record is not a record of its type, or its type is not
/// one this segment may hold (corruption: a writer never makes either).
public enum PayloadProblem: Error, Hashable, Sendable, CustomStringConvertible {
    /// A type code no format version defines.
    case unknownType(UInt8)
    /// A type code a later format version defines, in a segment of `version`.
    case undefinedInVersion(UInt8, version: UInt16)
    /// A fixed-size payload of another size.
    case wrongSize(RecordType, expected: Int, found: Int)
    /// A variable-size payload whose lengths and counts do not add up to its size.
    case malformed(RecordType, size: Int)
    /// A sample version or tombstone of the nil UUID (the index cannot hold it).
    case nilUUID(RecordType)
    /// An interval status code `IntervalStatus` does not define.
    case unknownIntervalStatus(UInt8)
    /// A padding record with a non-zero byte at this payload offset.
    case nonZeroPadding(at: Int)

    public var description: String {
        switch self {
        case .unknownType(let code): "unknown record type \(code)"
        case .undefinedInVersion(let code, let version): "record type \(code) is not defined in format version \(version)"
        case .wrongSize(let type, let expected, let found): "\(type.payloadName) payload must be \(expected) bytes, found \(found)"
        case .malformed(.samplesAcknowledged, let size): "samples-acknowledged payload of \(size) bytes does not match its count"
        case .malformed(let type, let size): "\(type.payloadName) payload of \(size) bytes is malformed"
        case .nilUUID(let type): "\(type.payloadName) record holds the nil UUID"
        case .unknownIntervalStatus(let code): "interval status code \(code) is unknown"
        case .nonZeroPadding(let at): "padding holds a non-zero byte at payload offset \(at)"
        }
    }
}
