/// A live segment file: its header, path and current size.
public struct SegmentInfo: Sendable, Equatable {
    public var header: SegmentHeader
    public var path: String
    /// Bytes in the file (header included).
    public var size: Int64

    public var sequence: UInt64 { header.sequence }
    public var basePosition: UInt64 { header.basePosition }
    public var endPosition: UInt64 { header.basePosition + UInt64(size) }
    public var name: String { SegmentName.fileName(sequence: header.sequence) }
}
