/// A plain `export.xml`: read in place, in the caller's chunks.
final class ExportXMLFileStream: ExportByteStream {
    private let file: ExportInputFile
    private(set) var inputPosition: Int64 = 0

    init(file: ExportInputFile) {
        self.file = file
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) throws -> Int {
        let n = try file.read(at: inputPosition, into: buffer, count: capacity)
        inputPosition += Int64(n)
        return n
    }
}
