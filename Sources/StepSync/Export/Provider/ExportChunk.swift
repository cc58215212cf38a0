/// A buffer of XML bytes passed from the reading thread to the scanning one.
///
/// Room is kept in front of the data (`prefixCapacity`) so that the scanner
/// can put the unfinished tail of the previous chunk (an element cut in two)
/// right before this one's bytes and scan them as one contiguous run, without
/// copying the chunk itself.
///
/// `@unchecked Sendable`: a chunk is owned by one thread at a time, and
/// changes hands only through `ExportReader`'s `BoundedQueue`s, under their locks.
final class ExportChunk: @unchecked Sendable {
    static let prefixCapacity = 64 << 10

    let capacity: Int
    private let storage: UnsafeMutablePointer<UInt8>
    /// Bytes of data at `data`.
    var count = 0
    /// Input-file offset the reader had reached after producing this chunk.
    var inputPosition: Int64 = 0

    init(capacity: Int) {
        self.capacity = capacity
        storage = .allocate(capacity: Self.prefixCapacity + capacity)
    }

    deinit { storage.deallocate() }

    var data: UnsafeMutablePointer<UInt8> { storage + Self.prefixCapacity }
}
