import CZlib
import StepLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a zip is written: appended front to back, with earlier bytes
/// patched in place (a local header gets its CRC and sizes once its entry
/// is finished).
public protocol ZipOutput: AnyObject {
    var size: Int64 { get }
    func append(_ bytes: UnsafeRawBufferPointer) throws
    func write(_ bytes: [UInt8], at offset: Int64) throws
}

/// A zip in memory (tests).
public final class ZipMemoryOutput: ZipOutput {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public var size: Int64 { Int64(bytes.count) }

    public func append(_ more: UnsafeRawBufferPointer) throws { bytes.append(contentsOf: more) }

    public func write(_ patch: [UInt8], at offset: Int64) throws {
        bytes.replaceSubrange(Int(offset)..<(Int(offset) + patch.count), with: patch)
    }
}

/// A zip file, written through StepLog's `FileDescriptor` (pwrite(2) at the
/// end, and at a header to patch it). Created or truncated; `close` syncs it.
public final class ZipFileOutput: ZipOutput {
    private let fd: FileDescriptor
    public private(set) var size: Int64 = 0

    public init(path: String) throws {
        fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC)
    }

    deinit { fd.close() }

    public func append(_ bytes: UnsafeRawBufferPointer) throws {
        try fd.write(bytes, at: size)
        size += Int64(bytes.count)
    }

    public func write(_ bytes: [UInt8], at offset: Int64) throws {
        try bytes.withUnsafeBytes { try fd.write($0, at: offset) }
    }

    public func sync() throws { try fd.sync() }
}

/// The one zip writer for synthetic exports, in tests and in `stepbench
/// export generate`: entries stored or raw-deflated (zlib `deflateInit2_`,
/// windowBits −15) as their bytes are streamed in, each local header patched
/// with the CRC-32 and sizes when its entry is finished, and ZIP64 records
/// where sizes or offsets need them — or everywhere with `zip64: true`, to
/// exercise that path with small files.
public final class ExportZipWriter {
    public enum Method: Sendable { case stored, deflate }

    private let output: ZipOutput
    private let forceZip64: Bool
    private var central: [UInt8] = []
    private var entries = 0
    private var anyZip64 = false

    public init(output: ZipOutput, zip64: Bool = false) {
        self.output = output
        forceZip64 = zip64
    }

    /// Starts an entry. `mayExceed4GiB`: its sizes are not known yet and may
    /// pass 4 GiB, so its local header gets ZIP64 fields.
    public func beginEntry(_ name: String, method: Method = .deflate, mayExceed4GiB: Bool = false) throws -> Entry {
        let zip64 = forceZip64 || mayExceed4GiB
        let offset = output.size
        let nameBytes = Array(name.utf8)
        var header: [UInt8] = []
        header.le32(0x0403_4B50)
        header.le16(zip64 ? 45 : 20)                // version needed
        header.le16(0x0800)                          // UTF-8 names
        header.le16(method == .deflate ? 8 : 0)
        header.le16(0x6000); header.le16(0x58C1)     // DOS time and date
        header.le32(0)                               // CRC, patched
        header.le32(zip64 ? 0xFFFF_FFFF : 0); header.le32(zip64 ? 0xFFFF_FFFF : 0)
        header.le16(UInt16(nameBytes.count))
        header.le16(zip64 ? 20 : 0)
        header += nameBytes
        if zip64 {
            header.le16(0x0001); header.le16(16)
            header.le64(0); header.le64(0)           // sizes, patched
        }
        try header.withUnsafeBytes { try output.append($0) }
        return try Entry(name: name, method: method, headerOffset: offset, zip64: zip64, output: output)
    }

    /// Patches the entry's local header and adds its central-directory record.
    public func finish(_ entry: Entry) throws {
        try entry.finish()
        let crc = UInt32(truncatingIfNeeded: entry.crc)
        var patch: [UInt8] = []
        patch.le32(crc)
        if entry.zip64 {
            patch.le32(0xFFFF_FFFF); patch.le32(0xFFFF_FFFF)
        } else {
            guard entry.compressed < 0xFFFF_FFFF, entry.uncompressed < 0xFFFF_FFFF else {
                throw ZipWriteError("entry \(entry.name) passed 4 GiB without ZIP64 fields")
            }
            patch.le32(UInt32(entry.compressed)); patch.le32(UInt32(entry.uncompressed))
        }
        try output.write(patch, at: entry.headerOffset + 14)
        let nameBytes = Array(entry.name.utf8)
        if entry.zip64 {
            var sizes: [UInt8] = []
            sizes.le64(UInt64(entry.uncompressed)); sizes.le64(UInt64(entry.compressed))
            try output.write(sizes, at: entry.headerOffset + 30 + Int64(nameBytes.count) + 4)
        }
        // The central record; a ZIP64 extra field for the values that need it.
        let needs = forceZip64 || entry.uncompressed >= 0xFFFF_FFFF || entry.compressed >= 0xFFFF_FFFF
            || entry.headerOffset >= 0xFFFF_FFFF
        var extra: [UInt8] = []
        if needs {
            anyZip64 = true
            extra.le16(0x0001); extra.le16(24)
            extra.le64(UInt64(entry.uncompressed)); extra.le64(UInt64(entry.compressed)); extra.le64(UInt64(entry.headerOffset))
        }
        central.le32(0x0201_4B50)
        central.le16(0x031E)                         // made by: Unix, 3.0
        central.le16(needs ? 45 : 20)
        central.le16(0x0800)
        central.le16(entry.method == .deflate ? 8 : 0)
        central.le16(0x6000); central.le16(0x58C1)
        central.le32(crc)
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.compressed))
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.uncompressed))
        central.le16(UInt16(nameBytes.count))
        central.le16(UInt16(extra.count))
        central.le16(0); central.le16(0); central.le16(0)
        central.le32(0o100644 << 16)
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.headerOffset))
        central += nameBytes
        central += extra
        entries += 1
    }

    /// A whole entry at once.
    public func add(_ name: String, _ data: [UInt8], method: Method = .deflate) throws {
        let entry = try beginEntry(name, method: method, mayExceed4GiB: data.count >= 0xFFFF_FFFF)
        try entry.write(data)
        try finish(entry)
    }

    public func add(_ name: String, _ text: String, method: Method = .deflate) throws {
        try add(name, Array(text.utf8), method: method)
    }

    /// Writes the central directory and the end records (ZIP64 ones when
    /// anything needed them).
    public func close() throws {
        let directoryOffset = output.size
        try central.withUnsafeBytes { try output.append($0) }
        let zip64 = forceZip64 || anyZip64 || directoryOffset >= 0xFFFF_FFFF || entries >= 0xFFFF
        var end: [UInt8] = []
        if zip64 {
            let zip64EndOffset = output.size
            end.le32(0x0606_4B50); end.le64(44)
            end.le16(0x031E); end.le16(45)
            end.le32(0); end.le32(0)
            end.le64(UInt64(entries)); end.le64(UInt64(entries))
            end.le64(UInt64(central.count)); end.le64(UInt64(directoryOffset))
            end.le32(0x0706_4B50); end.le32(0); end.le64(UInt64(zip64EndOffset)); end.le32(1)
        }
        end.le32(0x0605_4B50)
        end.le16(0); end.le16(0)
        end.le16(zip64 ? 0xFFFF : UInt16(entries)); end.le16(zip64 ? 0xFFFF : UInt16(entries))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(central.count))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(directoryOffset))
        end.le16(0)
        try end.withUnsafeBytes { try output.append($0) }
    }

    /// One entry being written: its bytes stored or deflated straight into
    /// the output, with their CRC-32 and sizes counted.
    public final class Entry {
        public let name: String
        let method: Method
        let headerOffset: Int64
        let zip64: Bool
        private let output: ZipOutput
        private var stream: UnsafeMutablePointer<z_stream>?
        private let buffer: UnsafeMutablePointer<UInt8>
        private static let bufferCapacity = 1 << 20
        private(set) var crc: UInt = CZlib.crc32(0, nil, 0)
        public private(set) var uncompressed: Int64 = 0
        public private(set) var compressed: Int64 = 0

        fileprivate init(name: String, method: Method, headerOffset: Int64, zip64: Bool, output: ZipOutput) throws {
            self.name = name
            self.method = method
            self.headerOffset = headerOffset
            self.zip64 = zip64
            self.output = output
            buffer = .allocate(capacity: Self.bufferCapacity)
            if method == .deflate {
                let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
                stream.initialize(to: z_stream())
                let status = deflateInit2_(stream, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                                           Int32(MemoryLayout<z_stream>.size))
                guard status == Z_OK else {
                    stream.deallocate()
                    buffer.deallocate()
                    throw ZipWriteError("zlib deflateInit2_ failed for \(name) (\(status))")
                }
                self.stream = stream
            }
        }

        deinit {
            if let stream {
                deflateEnd(stream)
                stream.deallocate()
            }
            buffer.deallocate()
        }

        public func write(_ bytes: [UInt8]) throws {
            try bytes.withUnsafeBufferPointer { piece in
                guard let base = piece.baseAddress, piece.count > 0 else { return }
                crc = CZlib.crc32(crc, base, UInt32(piece.count))
                uncompressed += Int64(piece.count)
                guard let stream else {
                    try output.append(UnsafeRawBufferPointer(piece))
                    compressed += Int64(piece.count)
                    return
                }
                stream.pointee.next_in = UnsafeMutablePointer(mutating: base)
                stream.pointee.avail_in = UInt32(piece.count)
                try pump(stream, Z_NO_FLUSH)
            }
        }

        fileprivate func finish() throws {
            guard let stream else { return }
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
            try pump(stream, Z_FINISH)
        }

        private func pump(_ stream: UnsafeMutablePointer<z_stream>, _ flush: Int32) throws {
            while true {
                stream.pointee.next_out = buffer
                stream.pointee.avail_out = UInt32(Self.bufferCapacity)
                let status = deflate(stream, flush)
                guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                    throw ZipWriteError("zlib deflate failed for \(name) (\(status))")
                }
                let produced = Self.bufferCapacity - Int(stream.pointee.avail_out)
                try output.append(UnsafeRawBufferPointer(start: buffer, count: produced))
                compressed += Int64(produced)
                if flush == Z_FINISH ? status == Z_STREAM_END : (stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0) {
                    return
                }
            }
        }
    }
}

/// A zip that cannot be written as asked (zlib failed, a size past 4 GiB
/// without ZIP64 fields). I/O errors are `StepLogError`s from `FileDescriptor`.
public struct ZipWriteError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

private extension Array where Element == UInt8 {
    mutating func le16(_ value: UInt16) { append(UInt8(value & 0xFF)); append(UInt8(value >> 8)) }
    mutating func le32(_ value: UInt32) { le16(UInt16(value & 0xFFFF)); le16(UInt16(value >> 16)) }
    mutating func le64(_ value: UInt64) { le32(UInt32(value & 0xFFFF_FFFF)); le32(UInt32(value >> 32)) }
}
