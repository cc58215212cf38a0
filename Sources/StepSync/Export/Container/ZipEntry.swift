/// One file in a zip, as its central-directory record describes it (ZIP64
/// sizes and offsets already applied).
struct ZipEntry: Sendable, Equatable {
    var name: String
    /// 0 stored, 8 deflate (the two this reader supports).
    var method: UInt16
    /// General-purpose bit flags; bit 0 = encrypted.
    var flags: UInt16
    var crc32: UInt32
    var compressedSize: Int64
    var uncompressedSize: Int64
    var localHeaderOffset: Int64

    var isDirectory: Bool { name.hasSuffix("/") }
    var isEncrypted: Bool { flags & 1 != 0 }
}
