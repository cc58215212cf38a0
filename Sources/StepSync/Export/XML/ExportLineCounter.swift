/// Line numbers and byte offsets for messages. Lines are counted lazily: a
/// cursor moves forward through the scanner's current buffer hopping from
/// newline to newline with `memchr`, only as far as the last position asked
/// about, so the cost is one pass over the newlines whatever is asked. CRLF
/// ends count once (by their LF). Byte offsets are counted from the first
/// byte of the XML (of the entry, for a zip): the scanner, which knows how
/// much it has consumed, sets `offsetAtBase` for each buffer.
struct ExportLineCounter {
    private var base: UnsafePointer<UInt8>?
    private var lineAtBase = 1
    /// The XML offset of the current buffer's first byte.
    var offsetAtBase: Int64 = 0
    private var cursor = 0
    private var lineAtCursor = 1

    /// Starts a new buffer whose first byte is on line `line`.
    mutating func reset(base: UnsafePointer<UInt8>, lineAtBase line: Int) {
        self.base = base
        lineAtBase = line
        cursor = 0
        lineAtCursor = line
    }

    /// The line (1-based) of the byte at `offset` of the current buffer.
    mutating func line(at offset: Int) -> Int {
        guard let base else { return lineAtBase }
        if offset < cursor {
            cursor = 0
            lineAtCursor = lineAtBase
        }
        var i = cursor
        while let newline = ExportByteSearch.find(0x0A, in: base, from: i, to: offset) {
            lineAtCursor += 1
            i = newline + 1
        }
        cursor = offset
        return lineAtCursor
    }

    /// The byte offset in the XML of the byte at `offset` of the current buffer.
    func byteOffset(at offset: Int) -> Int64 {
        offsetAtBase + Int64(offset)
    }

    /// Line and byte offset of the byte at `offset` of the current buffer.
    mutating func position(at offset: Int) -> ExportXMLPosition {
        ExportXMLPosition(line: line(at: offset), offset: byteOffset(at: offset))
    }
}
