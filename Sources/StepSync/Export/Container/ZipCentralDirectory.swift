/// Reads a zip's central directory: finds the end-of-central-directory record
/// (EOCD) at the end of the file, follows the ZIP64 locator when present (real
/// exports pass 4 GB, where the 32-bit fields saturate), and decodes one
/// `ZipEntry` per central-directory record. Reads only the directory, never
/// entry data. Layouts are those of PKWARE's APPNOTE.TXT, sections 4.3.12–4.3.16.
enum ZipCentralDirectory {
    static let localHeaderSignature: UInt32 = 0x0403_4B50
    static let centralHeaderSignature: UInt32 = 0x0201_4B50
    static let endSignature: UInt32 = 0x0605_4B50
    static let zip64EndSignature: UInt32 = 0x0606_4B50
    static let zip64LocatorSignature: UInt32 = 0x0706_4B50
    static let zip64ExtraID: UInt16 = 0x0001
    static let endRecordLength = 22
    static let zip64LocatorLength = 20
    static let maxCommentLength = 0xFFFF
    /// A directory larger than this is not an export's (which has thousands
    /// of entries at most, ~100 bytes each): refuse rather than allocate it.
    static let maxDirectoryBytes: Int64 = 256 << 20

    static func entries(of file: ExportInputFile) throws -> [ZipEntry] {
        let path = file.path
        let tailLength = Int(min(file.size, Int64(endRecordLength + maxCommentLength)))
        let tailOffset = file.size - Int64(tailLength)
        let tail = try file.readBytes(at: tailOffset, count: tailLength)
        guard let endIndex = findEndRecord(tail) else {
            throw ExportError.truncatedZip(path: path, offset: file.size,
                detail: "no end-of-central-directory record in its last \(tailLength) bytes (a complete zip ends with one)")
        }
        let endOffset = tailOffset + Int64(endIndex)
        // EOCD: signature, disk numbers (2 × u16), entries on this disk (u16),
        // total entries (u16), directory size (u32), directory offset (u32).
        var totalEntries = Int64(le16(tail, endIndex + 10))
        var directorySize = Int64(le32(tail, endIndex + 12))
        var directoryOffset = Int64(le32(tail, endIndex + 16))
        var directoryLimit = endOffset
        // ZIP64: a locator just before the EOCD points at the ZIP64 EOCD.
        if endOffset >= Int64(zip64LocatorLength) {
            let locatorOffset = endOffset - Int64(zip64LocatorLength)
            let locator = try file.readBytes(at: locatorOffset, count: zip64LocatorLength)
            if locator.count == zip64LocatorLength, le32(locator, 0) == zip64LocatorSignature {
                let zip64EndOffset = Int64(bitPattern: le64(locator, 8))
                let record = zip64EndOffset >= 0 && zip64EndOffset < locatorOffset
                    ? try file.readBytes(at: zip64EndOffset, count: 56) : []
                guard record.count == 56, le32(record, 0) == zip64EndSignature else {
                    throw ExportError.damagedZip(path: path, offset: locatorOffset,
                        detail: "the ZIP64 locator points at byte offset \(zip64EndOffset), where there is no ZIP64 end record")
                }
                totalEntries = Int64(bitPattern: le64(record, 32))
                directorySize = Int64(bitPattern: le64(record, 40))
                directoryOffset = Int64(bitPattern: le64(record, 48))
                directoryLimit = zip64EndOffset
            }
        }
        guard directoryOffset >= 0, directorySize >= 0, totalEntries >= 0 else {
            throw ExportError.damagedZip(path: path, offset: endOffset, detail: "negative central-directory size or offset")
        }
        guard directorySize <= maxDirectoryBytes else {
            throw ExportError.damagedZip(path: path, offset: endOffset,
                detail: "central directory of \(directorySize) bytes is larger than any export's")
        }
        guard directoryOffset <= directoryLimit - directorySize else {   // (no overflow: both are bounded above)
            throw ExportError.truncatedZip(path: path, offset: directoryOffset,
                detail: "the central directory (\(directorySize) bytes) does not fit before its end record at byte offset \(directoryLimit)")
        }
        let directory = try file.readBytes(at: directoryOffset, count: Int(directorySize))
        return try parse(directory, at: directoryOffset, expected: totalEntries, path: path)
    }

    /// Offset of the EOCD in `tail`: the last signature whose comment fits.
    static func findEndRecord(_ tail: [UInt8]) -> Int? {
        guard tail.count >= endRecordLength else { return nil }
        var i = tail.count - endRecordLength
        while i >= 0 {
            if tail[i] == 0x50, tail[i + 1] == 0x4B, tail[i + 2] == 0x05, tail[i + 3] == 0x06 {
                let commentLength = Int(tail[i + 20]) | Int(tail[i + 21]) << 8
                if i + endRecordLength + commentLength <= tail.count { return i }
            }
            i -= 1
        }
        return nil
    }

    private static func parse(_ directory: [UInt8], at directoryOffset: Int64, expected: Int64,
                              path: String) throws -> [ZipEntry] {
        var entries: [ZipEntry] = []
        entries.reserveCapacity(Int(min(expected, 1 << 16)))
        var i = 0
        while i < directory.count, Int64(entries.count) < expected {
            let here = directoryOffset + Int64(i)
            guard i + 46 <= directory.count else {
                throw ExportError.damagedZip(path: path, offset: here, detail: "central-directory record is cut off")
            }
            guard le32(directory, i) == centralHeaderSignature else {
                throw ExportError.damagedZip(path: path, offset: here, detail: "expected a central-directory record signature")
            }
            let flags = le16(directory, i + 8)
            let method = le16(directory, i + 10)
            let crc = le32(directory, i + 16)
            var compressed = Int64(le32(directory, i + 20))
            var uncompressed = Int64(le32(directory, i + 24))
            let nameLength = Int(le16(directory, i + 28))
            let extraLength = Int(le16(directory, i + 30))
            let commentLength = Int(le16(directory, i + 32))
            var localOffset = Int64(le32(directory, i + 42))
            let end = i + 46 + nameLength + extraLength + commentLength
            guard end <= directory.count else {
                throw ExportError.damagedZip(path: path, offset: here, detail: "central-directory record runs past the directory")
            }
            let name = String(decoding: directory[(i + 46)..<(i + 46 + nameLength)], as: UTF8.self)
            // ZIP64 extended information: 8-byte values for exactly the fields
            // whose 32-bit slot is 0xFFFFFFFF, in this order.
            var e = i + 46 + nameLength
            let extraEnd = e + extraLength
            while e + 4 <= extraEnd {
                let id = le16(directory, e)
                let size = Int(le16(directory, e + 2))
                let dataEnd = min(e + 4 + size, extraEnd)
                if id == zip64ExtraID {
                    var f = e + 4
                    func next() -> Int64? {
                        guard f + 8 <= dataEnd else { return nil }
                        defer { f += 8 }
                        return Int64(bitPattern: le64(directory, f))
                    }
                    if uncompressed == 0xFFFF_FFFF, let v = next() { uncompressed = v }
                    if compressed == 0xFFFF_FFFF, let v = next() { compressed = v }
                    if localOffset == 0xFFFF_FFFF, let v = next() { localOffset = v }
                }
                e = dataEnd
            }
            guard compressed >= 0, uncompressed >= 0, localOffset >= 0 else {
                throw ExportError.damagedZip(path: path, offset: here, detail: "entry '\(name)' has a negative size or offset")
            }
            entries.append(ZipEntry(name: name, method: method, flags: flags, crc32: crc, compressedSize: compressed,
                                    uncompressedSize: uncompressed, localHeaderOffset: localOffset))
            i = end
        }
        return entries
    }

    static func le16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    static func le32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(le16(bytes, at)) | UInt32(le16(bytes, at + 2)) << 16
    }

    static func le64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        UInt64(le32(bytes, at)) | UInt64(le32(bytes, at + 4)) << 32
    }
}
