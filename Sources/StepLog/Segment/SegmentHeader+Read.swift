#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SegmentHeader {
    /// Reads and decodes the header of the open segment file `fd` (the one
    /// reader of headers: opening, verify and dump all go through it).
    public static func read(_ fd: FileDescriptor) throws -> Result<SegmentHeader, Problem> {
        var bytes = [UInt8](repeating: 0, count: FormatConstants.segmentHeaderSize)
        let n = try bytes.withUnsafeMutableBytes { try fd.read(into: $0.baseAddress!, count: $0.count, at: 0) }
        return bytes.withUnsafeBytes { decode(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
    }
}
