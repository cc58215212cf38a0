// Shared by every fuzz target (compiled into each; see tools/fuzz).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import StepLog

/// Fails the run when an invariant does not hold: prints why and aborts, which
/// libFuzzer reports as a crash and saves the input as a reproducer.
@inline(never)
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #fileID, line: UInt = #line) {
    guard !condition() else { return }
    fputs("fuzz invariant failed at \(file):\(line): \(message())\n", stderr)
    abort()
}

/// A scratch directory of this process (on tmpfs when there is one), made once.
let fuzzScratchDirectory: String = {
    let base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp")
    var template = Array("\(base)/steplog-fuzz-XXXXXX".utf8CString)
    guard let made = mkdtemp(&template) else { fatalError("cannot create a scratch directory under \(base)") }
    let path = String(cString: made)
    atexit { removeFuzzScratchDirectory() }
    return path
}()

private func removeFuzzScratchDirectory() {
    _ = fuzzRemoveTree(fuzzScratchDirectory)
}

/// Removes `path` and everything under it (no symlinks are followed).
@discardableResult
func fuzzRemoveTree(_ path: String) -> Bool {
    var info = stat()
    guard lstat(path, &info) == 0 else { return false }
    if (info.st_mode & S_IFMT) == S_IFDIR, let dir = opendir(path) {
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
            if name == "." || name == ".." { continue }
            fuzzRemoveTree(path + "/" + name)
        }
        closedir(dir)
        return rmdir(path) == 0
    }
    return unlink(path) == 0
}

/// Writes `bytes` to `path`, replacing it.
func fuzzWriteFile(_ path: String, _ bytes: UnsafeRawBufferPointer) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { fatalError("cannot write \(path): errno \(errno)") }
    var done = 0
    while done < bytes.count {
        let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
        guard n > 0 else { fatalError("cannot write \(path): errno \(errno)") }
        done += n
    }
    close(fd)
}

/// Reads the whole file at `path`.
func fuzzReadFile(_ path: String) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { fatalError("cannot read \(path): errno \(errno)") }
    defer { close(fd) }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n <= 0 { break }
        result += chunk[0..<n]
    }
    return result
}

/// Checksum repair, so mutations reach the decoders behind the checksums
/// (libFuzzer rarely guesses a CRC-32C). The fuzz input says, in a leading
/// mode byte, which repairs to make; without them the bytes are used as given.
enum FuzzChecksums {
    /// Rewrites each record frame's checksum from `start`, following lengths
    /// while they fit (as a writer would have written them).
    static func repairRecords(_ bytes: inout [UInt8], from start: Int) {
        var at = start
        let h = FormatConstants.recordHeaderSize
        while at + h <= bytes.count {
            let length = Int(UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24)
            guard length <= FormatConstants.maxRecordPayload, at + h + length <= bytes.count else { return }
            let crc = bytes.withUnsafeBytes { all -> UInt32 in
                let c = CRC32C.extend(0, UnsafeRawBufferPointer(rebasing: all[(at + 4)..<(at + 5)]))
                return CRC32C.mask(CRC32C.extend(c, UnsafeRawBufferPointer(rebasing: all[(at + h)..<(at + h + length)])))
            }
            store32(crc, in: &bytes, at: at + 5)
            at += h + length
        }
    }

    /// Rewrites the segment header's checksum for the layout its version field names.
    static func repairSegmentHeader(_ bytes: inout [UInt8]) {
        guard bytes.count >= FormatConstants.segmentHeaderSizeV1 else { return }
        let version = UInt16(bytes[8]) | UInt16(bytes[9]) << 8
        let size = version == 1 ? FormatConstants.segmentHeaderSizeV1 : FormatConstants.segmentHeaderSize
        guard bytes.count >= size else { return }
        let crc = CRC32C.mask(CRC32C.checksum(Array(bytes[0..<(size - 4)])))
        store32(crc, in: &bytes, at: size - 4)
    }

    /// Rewrites a snapshot file's body and header checksums.
    static func repairSnapshot(_ bytes: inout [UInt8]) {
        let headerSize = FormatConstants.snapshotHeaderSize
        guard bytes.count >= headerSize else { return }
        let body = CRC32C.mask(CRC32C.checksum(Array(bytes[headerSize...])))
        store32(body, in: &bytes, at: headerSize - 8)
        let header = CRC32C.mask(CRC32C.checksum(Array(bytes[0..<(headerSize - 4)])))
        store32(header, in: &bytes, at: headerSize - 4)
    }

    static func store32(_ value: UInt32, in bytes: inout [UInt8], at offset: Int) {
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * i)) }
    }
}

/// The segment targets' input: a mode byte, then a segment file. Mode bits:
/// 0 repair the header checksum, 1 repair each record's checksum (following
/// lengths), 2 expand a version 2 header to its 4 KiB block (zeros inserted
/// after the 48 header bytes), so that mutations reach past the checksums.
enum FuzzSegmentInput {
    static func file(_ data: UnsafePointer<UInt8>, _ size: Int) -> [UInt8] {
        guard size >= 1 else { return [] }
        let mode = data[0]
        var file = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
        let isVersion1 = file.count >= 10 && file[8] == 1 && file[9] == 0
        if mode & 4 != 0, !isVersion1, file.count >= FormatConstants.segmentHeaderSize {
            file.insert(contentsOf: [UInt8](repeating: 0, count: FormatConstants.dataStartV2 - FormatConstants.segmentHeaderSize),
                        at: FormatConstants.segmentHeaderSize)
        }
        if mode & 1 != 0 { FuzzChecksums.repairSegmentHeader(&file) }
        if mode & 2 != 0 {
            FuzzChecksums.repairRecords(&file, from: isVersion1 ? FormatConstants.segmentHeaderSizeV1 : FormatConstants.dataStartV2)
        }
        return file
    }

    /// The sequence number the file's header claims (1 when it is too short).
    static func sequence(_ file: [UInt8]) -> UInt64 {
        guard file.count >= FormatConstants.headerSequenceOffset + 8 else { return 1 }
        var sequence: UInt64 = 0
        for i in 0..<8 { sequence |= UInt64(file[FormatConstants.headerSequenceOffset + i]) << (8 * i) }
        return sequence
    }
}
