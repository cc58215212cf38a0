// Fuzz target `segment`: a whole segment file read through the readers every
// open uses, on a file (tmpfs when there is one): SegmentHeader.read, then
// SegmentReader record by record with the replay's per-record checks
// (`nextRecord`: the type defined in the header's version, the payload's shape),
// then SegmentTail.classify at the first damage, as the newest segment and as
// a sealed one. (`store-open` runs the same file through StepLogStore.open.)
//
// Input: a mode byte, then the file (FuzzSegmentInput: checksum repair and
// header-block expansion).
//
// Invariants beyond "no crash":
// - records follow each other from the data start, each inside the file;
//   damage, when any, is where the last record ended, and nothing follows it;
// - a reader with a 64-byte window (grown only for large records) returns
//   exactly what the default 4 MiB window returns;
// - the tail verdict stays inside the file: an unsynced tail ends at or after
//   the damage; a vouching record lies after the damage and is a checksummed
//   synced-through record (version 2) claiming an offset past it.
#if canImport(Glibc)
import Glibc
#endif
@testable import StepLog

private let segmentPath = fuzzScratchDirectory + "/segment.log"

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSegment(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let file = FuzzSegmentInput.file(data, size)
    file.withUnsafeBytes { fuzzWriteFile(segmentPath, $0) }
    guard let fd = try? FileDescriptor.open(segmentPath, O_RDONLY) else { fuzzCheck(false, "cannot open \(segmentPath)"); return 0 }
    defer { fd.close() }
    guard let fileSize = try? fd.size(), case .success(let header)? = try? SegmentHeader.read(fd) else { return 0 }
    let segment = SegmentInfo(header: header, path: segmentPath, size: fileSize)
    guard segment.dataStart <= fileSize else { return 0 }

    let wide = scan(segment, fd: fd, windowSize: 4 << 20)
    let narrow = scan(segment, fd: fd, windowSize: 64)
    fuzzCheck(wide == narrow, "the reader's window changes what it reads: \(wide) vs \(narrow)")

    if let damage = wide.damage {
        for isNewest in [true, false] {
            guard let verdict = try? SegmentTail.classify(segment, fd: fd, damageAt: damage.offset, isNewest: isNewest,
                                                         checksummed: !damage.mayBeTorn) else {
                fuzzCheck(false, "classify threw on a readable file"); return 0
            }
            switch verdict {
            case .unsyncedTail(let garbageEnd):
                fuzzCheck(isNewest && damage.mayBeTorn, "a sealed segment or a checksummed record called an unsynced tail")
                fuzzCheck(garbageEnd >= damage.offset && garbageEnd <= fileSize,
                          "unsynced tail from \(damage.offset) ends at \(garbageEnd), file \(fileSize)")
            case .corruption(let vouchedBy?):
                fuzzCheck(vouchedBy > damage.offset && vouchedBy < fileSize, "vouched by \(vouchedBy) for damage at \(damage.offset)")
                if header.version != 1 { checkVouching(file, at: Int(vouchedBy), damage: damage.offset) }
            case .corruption(nil):
                fuzzCheck(!isNewest || !damage.mayBeTorn, "corruption in the newest segment with nothing vouching for it")
            }
        }
    }
    return 0
}

private struct Scan: Equatable, CustomStringConvertible {
    struct Record: Equatable { var offset: Int64; var type: UInt8; var payload: [UInt8] }
    struct Damage: Equatable { var offset: Int64; var reason: String; var mayBeTorn: Bool }
    var records: [Record] = []
    var damage: Damage?
    var dataEnd: Int64 = 0
    var endedInZeros = false
    var description: String {
        "\(records.count) records, data end \(dataEnd), zeros \(endedInZeros), damage \(damage.map { "\($0.offset): \($0.reason)" } ?? "-")"
    }
}

/// What replay sees in the segment: its records until the first damage,
/// with replay's checks of each record's type and shape.
private func scan(_ segment: SegmentInfo, fd: FileDescriptor, windowSize: Int) -> Scan {
    var result = Scan()
    var reader = SegmentReader(fd: fd, fileSize: segment.size, from: segment.dataStart, windowSize: windowSize)
    var expected = segment.dataStart
    do {
        while let step = try reader.nextRecord(version: segment.header.version) {
            fuzzCheck(result.damage == nil, "the reader went on after damage")
            switch step {
            case .record(let record, let offset, let size):
                fuzzCheck(offset == expected && offset + Int64(size) <= segment.size && size == record.frameSize,
                          "record at \(offset) of \(size) bytes, expected at \(expected), file \(segment.size)")
                expected = offset + Int64(size)
                result.records.append(.init(offset: offset, type: record.type.rawValue, payload: Array(record.payload)))
            case .malformed(let offset, let problem):
                fuzzCheck(offset == expected, "malformed record at \(offset), expected at \(expected)")
                result.damage = .init(offset: offset, reason: problem.description, mayBeTorn: false)
                return result
            case .damage(let offset, let damage):
                fuzzCheck(offset == expected, "damage reported at \(offset), the last record ended at \(expected)")
                result.damage = .init(offset: offset, reason: damage.description, mayBeTorn: true)
            }
        }
    } catch {
        fuzzCheck(false, "reading \(segment.path) threw: \(error)")
    }
    result.dataEnd = reader.offset
    result.endedInZeros = reader.endedInZeros
    fuzzCheck(result.damage != nil || reader.offset == segment.size || reader.endedInZeros,
              "the reader stopped at \(reader.offset) of \(segment.size) with neither damage nor zeros")
    return result
}

/// The record at `offset` must be a checksummed synced-through record claiming more than `damage`.
private func checkVouching(_ file: [UInt8], at offset: Int, damage: Int64) {
    file.withUnsafeBytes { bytes in
        guard case .record(let type, let payload, _) = RecordFrame.decode(bytes, at: offset),
              type == RecordType.syncedThrough.rawValue, payload.count == 8 else {
            fuzzCheck(false, "the record vouching at \(offset) is not a synced-through record"); return
        }
        fuzzCheck(UInt64(littleEndian: payload.loadUnaligned(as: UInt64.self)) > UInt64(damage), "the vouching record claims too little")
    }
}

/// Seeds: see FuzzSeedStore.writeSegmentSeeds.
@_cdecl("LLVMFuzzerInitialize")
public func initializeSegmentFuzz(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    FuzzSeeds.writeIfRequested { dir in try FuzzSeedStore.writeSegmentSeeds(in: dir) }
    return 0
}
