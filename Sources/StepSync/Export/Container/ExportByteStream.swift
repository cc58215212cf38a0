/// The XML bytes of an export, pulled in order: the file itself, or a zip
/// entry inflated on the fly. Used by one thread at a time.
protocol ExportByteStream: AnyObject {
    /// Fills up to `capacity` bytes at `buffer`; returns how many (fewer only
    /// at the end of the stream; 0 once it has ended). Integrity checks that
    /// need the whole stream (a zip entry's size and CRC-32) run before the
    /// final call returns.
    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) throws -> Int
    /// Bytes of the input file consumed so far, as a file offset.
    var inputPosition: Int64 { get }
}
