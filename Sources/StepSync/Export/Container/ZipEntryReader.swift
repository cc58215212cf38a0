import CZlib

/// Streams one zip entry's uncompressed bytes, reading the zip in place in
/// 1 MiB pieces: stored entries are copied, deflated ones go through the
/// system zlib's raw inflate (`inflateInit2_` with windowBits -15: a zip entry
/// is a bare deflate stream, without zlib or gzip framing). Nothing is written
/// to disk and memory is the input piece plus zlib's 32 KiB window.
///
/// At the end of the entry the byte count and the CRC-32 (zlib's `crc32`)
/// are checked against the central directory before the last bytes are
/// returned, so damaged data never passes as a complete export.
final class ZipEntryReader: ExportByteStream {
    static let inputCapacity = 1 << 20

    let file: ExportInputFile
    let entry: ZipEntry
    /// File offset of the entry's first data byte (after its local header).
    let dataOffset: Int64
    private var stream: UnsafeMutablePointer<z_stream>?
    private let input: UnsafeMutablePointer<UInt8>
    /// Compressed bytes read from the file so far.
    private var fed: Int64 = 0
    private(set) var produced: Int64 = 0
    private var crc: UInt = 0
    private var ended = false

    init(file: ExportInputFile, entry: ZipEntry) throws {
        self.file = file
        self.entry = entry
        let path = file.path
        let header = try file.readBytes(at: entry.localHeaderOffset, count: 30)
        guard header.count == 30 else {
            throw ExportError.truncatedZip(path: path, offset: file.size,
                detail: "the local header of '\(entry.name)' at byte offset \(entry.localHeaderOffset) is cut off")
        }
        guard ZipCentralDirectory.le32(header, 0) == ZipCentralDirectory.localHeaderSignature else {
            throw ExportError.damagedZip(path: path, offset: entry.localHeaderOffset,
                detail: "no local header signature for entry '\(entry.name)'")
        }
        guard !entry.isEncrypted else {
            throw ExportError.damagedZip(path: path, offset: entry.localHeaderOffset, detail: "entry '\(entry.name)' is encrypted")
        }
        guard entry.method == 0 || entry.method == 8 else {
            throw ExportError.damagedZip(path: path, offset: entry.localHeaderOffset,
                detail: "entry '\(entry.name)' uses compression method \(entry.method) (supported: 0 stored, 8 deflate)")
        }
        let nameLength = Int64(ZipCentralDirectory.le16(header, 26))
        let extraLength = Int64(ZipCentralDirectory.le16(header, 28))
        dataOffset = entry.localHeaderOffset + 30 + nameLength + extraLength
        // Compared without forming dataOffset + size, which a hostile ZIP64
        // field could overflow.
        guard entry.compressedSize <= file.size - dataOffset else {
            let needed = entry.compressedSize.addingReportingOverflow(dataOffset)
            throw ExportError.truncatedZip(path: path, offset: file.size,
                detail: "entry '\(entry.name)' needs bytes up to offset \(needed.overflow ? Int64.max : needed.partialValue) but the file ends at \(file.size)")
        }
        if entry.method == 0, entry.compressedSize != entry.uncompressedSize {
            throw ExportError.damagedZip(path: path, offset: entry.localHeaderOffset,
                detail: "stored entry '\(entry.name)' has compressed size \(entry.compressedSize) != size \(entry.uncompressedSize)")
        }
        // A piece of at most 1 MiB, no larger than the entry's data (small side files cost little).
        input = .allocate(capacity: Int(max(1, min(Int64(Self.inputCapacity), entry.compressedSize))))
        crc = CZlib.crc32(0, nil, 0)
        if entry.method == 8 {
            let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            stream.initialize(to: z_stream())
            // zlib keeps a pointer back to the z_stream: it must not move,
            // hence the heap allocation.
            let status = inflateInit2_(stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
            guard status == Z_OK else {
                stream.deallocate()
                input.deallocate()
                throw ExportError.damagedZip(path: path, offset: dataOffset, detail: "zlib inflateInit2_ failed (\(status))")
            }
            self.stream = stream
        }
    }

    deinit {
        if let stream {
            inflateEnd(stream)
            stream.deallocate()
        }
        input.deallocate()
    }

    var inputPosition: Int64 {
        dataOffset + fed - Int64(stream?.pointee.avail_in ?? 0)
    }

    func read(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int) throws -> Int {
        guard !ended, capacity > 0 else { return 0 }
        let n: Int
        if let stream {
            n = try inflate(stream, into: buffer, capacity: capacity)
        } else {
            let remaining = entry.compressedSize - fed
            let wanted = Int(min(Int64(capacity), remaining))
            n = try file.read(at: dataOffset + fed, into: buffer, count: wanted)
            guard n == wanted else {
                throw ExportError.truncatedZip(path: file.path, offset: dataOffset + fed + Int64(n),
                    detail: "stored entry '\(entry.name)' is cut off")
            }
            fed += Int64(n)
            if fed == entry.compressedSize { ended = true }
        }
        crc = CZlib.crc32(crc, buffer, UInt32(n))
        produced += Int64(n)
        if produced > entry.uncompressedSize { throw inflatesTooMuch() }
        if ended { try verify() }
        return n
    }

    private func inflate(_ stream: UnsafeMutablePointer<z_stream>, into buffer: UnsafeMutablePointer<UInt8>,
                         capacity: Int) throws -> Int {
        stream.pointee.next_out = buffer
        stream.pointee.avail_out = UInt32(min(capacity, Int(UInt32.max)))
        while stream.pointee.avail_out > 0 {
            if stream.pointee.avail_in == 0, fed < entry.compressedSize {
                let wanted = Int(min(Int64(Self.inputCapacity), entry.compressedSize - fed))
                let got = try file.read(at: dataOffset + fed, into: input, count: wanted)
                guard got > 0 else {
                    throw ExportError.truncatedZip(path: file.path, offset: dataOffset + fed,
                        detail: "the data of entry '\(entry.name)' is cut off")
                }
                fed += Int64(got)
                stream.pointee.next_in = input
                stream.pointee.avail_in = UInt32(got)
            }
            let status = CZlib.inflate(stream, Z_NO_FLUSH)
            if status == Z_STREAM_END {
                ended = true
                break
            }
            if status == Z_OK { continue }
            let endsEarly = status == Z_BUF_ERROR && stream.pointee.avail_in == 0 && fed == entry.compressedSize
            if status == Z_BUF_ERROR && !endsEarly { continue }
            // An error. When the bytes inflated before it already pass the
            // declared size, that overrun comes first in the entry and is what
            // is reported, as it is when the caller reads in small pieces.
            if produced + Int64(capacity - Int(stream.pointee.avail_out)) > entry.uncompressedSize {
                throw inflatesTooMuch()
            }
            if endsEarly {
                throw ExportError.damagedZip(path: file.path, offset: dataOffset + fed,
                    detail: "the deflate data of entry '\(entry.name)' ends before its end-of-stream marker")
            }
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "zlib status \(status)"
            throw ExportError.damagedZip(path: file.path, offset: inputPosition,
                detail: "deflate data error in entry '\(entry.name)': \(message)")
        }
        return capacity - Int(stream.pointee.avail_out)
    }

    private func inflatesTooMuch() -> ExportError {
        .damagedZip(path: file.path, offset: inputPosition,
                    detail: "entry '\(entry.name)' inflates to more than the \(entry.uncompressedSize) bytes its directory record declares")
    }

    private func verify() throws {
        guard produced == entry.uncompressedSize else {
            throw ExportError.damagedZip(path: file.path, offset: entry.localHeaderOffset,
                detail: "entry '\(entry.name)' holds \(produced) bytes, its directory record says \(entry.uncompressedSize)")
        }
        let actual = UInt32(truncatingIfNeeded: crc)
        guard actual == entry.crc32 else {
            throw ExportError.badCRC(path: file.path, entry: entry.name, offset: entry.localHeaderOffset,
                                     expected: entry.crc32, actual: actual)
        }
    }
}
