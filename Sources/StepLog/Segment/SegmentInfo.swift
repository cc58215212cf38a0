/// A live segment file: its header, path and current size.
public struct SegmentInfo: Sendable, Equatable {
    public var header: SegmentHeader
    public var path: String
    /// Bytes in the file (header included).
    public var size: Int64

    public init(header: SegmentHeader, path: String, size: Int64) {
        self.header = header
        self.path = path
        self.size = size
    }

    public var sequence: UInt64 { header.sequence }
    public var basePosition: UInt64 { header.basePosition }
    public var endPosition: UInt64 { header.basePosition + UInt64(size) }
    /// Offset of the first record (by the header's version).
    public var dataStart: Int64 { header.dataStart }
    /// Where the next segment starts: the header's range end when it reserved
    /// one, else where this segment ends.
    public var nextBasePosition: UInt64 { header.rangeEnd != 0 ? header.rangeEnd : endPosition }
    public var name: String { SegmentName.fileName(sequence: header.sequence) }
}
