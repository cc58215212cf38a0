import Foundation
import Testing
@testable import StepLog

/// The segment reader on hand-made files, one test per way a scan ends (as
/// LevelDB's log_test has one per reader error path), and the unsynced-tail
/// rule (`SegmentTail`) on each kind of damage.
@Suite struct SegmentReaderTests {
    static let dataStart = Int64(FormatConstants.dataStartV2)

    /// A version 2 segment file: the header block, then `body`.
    static func segment(_ body: [UInt8], sequence: UInt64 = 1, version: UInt16 = 2) -> [UInt8] {
        SegmentHeader(sequence: sequence, basePosition: 0, version: version).encodedBlock() + body
    }

    static func record(_ record: LogRecord) -> [UInt8] { GoldenExample.encoded(record) }

    /// A record with a good checksum of any type code and payload.
    static func raw(type: UInt8, _ payload: [UInt8]) -> [UInt8] {
        var crc = CRC32C.checksum([type])
        crc = payload.withUnsafeBytes { CRC32C.extend(crc, $0) }
        return withUnsafeBytes(of: UInt32(payload.count).littleEndian, Array.init) + [type]
            + withUnsafeBytes(of: CRC32C.mask(crc).littleEndian, Array.init) + payload
    }

    static let a = record(.intervalsCleared(atMilliseconds: 1))
    static let b = record(.sampleDeleted(id: .test(1), deletedAtMilliseconds: 2))

    struct Scan {
        var records: [(offset: Int64, type: UInt8)] = []
        var damage: (offset: Int64, SegmentDamage)?
        var end: Int64 = 0
        var endedInZeros = false
    }

    /// Reads `bytes` (written to a file) with a reader of `window` bytes.
    static func scan(_ bytes: [UInt8], window: Int = 4 << 20) throws -> Scan {
        let tmp = TemporaryDirectory()
        let path = tmp.sub("000000000001.log")
        writeFile(path, bytes)
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        let header = try SegmentHeader.read(fd).get()
        var reader = SegmentReader(fd: fd, fileSize: Int64(bytes.count), from: header.dataStart, windowSize: window)
        var result = Scan()
        while let item = try reader.next() {
            switch item {
            case .record(let offset, let type, _, _): result.records.append((offset, type))
            case .damage(let offset, let damage):
                #expect(result.damage == nil, "damage is reported once")
                result.damage = (offset, damage)
            }
        }
        #expect(try reader.next() == nil, "nothing after the end")
        result.end = reader.offset
        result.endedInZeros = reader.endedInZeros
        return result
    }

    @Test func aCleanEnd() throws {
        let s = try Self.scan(Self.segment(Self.a + Self.b))
        #expect(s.records.map(\.offset) == [Self.dataStart, Self.dataStart + Int64(Self.a.count)])
        #expect(s.records.map(\.type) == [4, 7])
        #expect(s.damage == nil && !s.endedInZeros)
        #expect(s.end == Self.dataStart + Int64(Self.a.count + Self.b.count))
    }

    @Test func anEmptySegmentAndOneCutInsideItsHeaderBlock() throws {
        let empty = try Self.scan(Self.segment([]))
        #expect(empty.records.isEmpty && empty.damage == nil && empty.end == Self.dataStart)
        let cut = try Self.scan(Array(Self.segment([]).prefix(1_000)))
        #expect(cut.records.isEmpty && cut.damage == nil)
    }

    @Test func zeroFilledSpaceEndsTheData() throws {
        let s = try Self.scan(Self.segment(Self.a + [UInt8](repeating: 0, count: 10_000)))
        #expect(s.records.count == 1 && s.damage == nil && s.endedInZeros)
        #expect(s.end == Self.dataStart + Int64(Self.a.count))
    }

    @Test func aHeaderCutShort() throws {
        for n in 1..<FormatConstants.recordHeaderSize {
            let s = try Self.scan(Self.segment(Self.a + Array(Self.b.prefix(n))))
            #expect(s.records.count == 1)
            #expect(s.damage?.0 == Self.dataStart + Int64(Self.a.count))
            #expect(s.damage?.1 == .truncatedHeader(available: n))
        }
    }

    @Test func aPayloadCutShort() throws {
        for n in FormatConstants.recordHeaderSize..<Self.b.count {
            let s = try Self.scan(Self.segment(Self.a + Array(Self.b.prefix(n))))
            #expect(s.damage?.1 == .truncatedPayload(declared: 24, available: n - 9))
        }
    }

    @Test func anImpossibleLength() throws {
        var bad = Self.b
        bad[3] = 0x02 // 32 MiB + 24
        let s = try Self.scan(Self.segment(Self.a + bad + Self.a))
        #expect(s.damage?.1 == .impossibleLength(0x0200_0018))
        #expect(s.records.count == 1, "nothing after damage is returned")
    }

    @Test func aChecksumMismatchStopsTheScanThere() throws {
        var bad = Self.b
        bad[20] ^= 0x01
        let s = try Self.scan(Self.segment(Self.a + bad + Self.a))
        guard case .checksumMismatch? = s.damage?.1 else { Issue.record("got \(String(describing: s.damage))"); return }
        #expect(s.damage?.0 == Self.dataStart + Int64(Self.a.count))
        #expect(s.records.count == 1, "after a bad checksum the length is not trusted and nothing more is read")
        #expect(s.end == Self.dataStart + Int64(Self.a.count))
    }

    @Test func garbageThenZerosIsDamageNotTheEnd() throws {
        let s = try Self.scan(Self.segment(Self.a + [0, 0, 7] + [UInt8](repeating: 0, count: 100)))
        #expect(s.damage != nil && !s.endedInZeros)
    }

    @Test func anUndefinedTypeIsReturnedAsReadForTheDecoderToRefuse() throws {
        // The reader checks framing only; what a type means is the replay's
        // business, which refuses it (see UndefinedRecordTypeTests).
        let s = try Self.scan(Self.segment(Self.a + Self.raw(type: 0xFE, []) + Self.a))
        #expect(s.records.map(\.type) == [4, 0xFE, 4] && s.damage == nil)
    }

    @Test func aRecordLargerThanTheWindow() throws {
        let big = Self.record(.sourceAnchor(family: 1, anchor: [UInt8](repeating: 9, count: 40_000)))
        let s = try Self.scan(Self.segment(Self.a + big + Self.b), window: 4_096)
        #expect(s.records.map(\.type) == [4, 10, 7] && s.damage == nil)
    }

    @Test func versionOneRecordsStartAfterForty() throws {
        let s = try Self.scan(SegmentHeader(sequence: 1, basePosition: 0, version: 1).encoded() + Self.a)
        #expect(s.records.map(\.offset) == [40])
    }
}

@Suite struct SegmentTailTests {
    typealias R = SegmentReaderTests

    /// Classifies damage at `offset` of `bytes` (a segment file).
    func classify(_ bytes: [UInt8], at offset: Int, newest: Bool = true, checksummed: Bool = false,
                  version: UInt16 = 2) throws -> SegmentTail.Verdict {
        let tmp = TemporaryDirectory()
        let path = tmp.sub("000000000001.log")
        writeFile(path, bytes)
        let fd = try FileDescriptor.open(path, O_RDONLY)
        defer { fd.close() }
        let info = SegmentInfo(header: SegmentHeader(sequence: 1, basePosition: 0, version: version), path: path, size: Int64(bytes.count))
        return try SegmentTail.classify(info, fd: fd, damageAt: Int64(offset), isNewest: newest, checksummed: checksummed)
    }

    let start = FormatConstants.dataStartV2
    var garbage: [UInt8] { [0xDE, 0xAD, 0xBE, 0xEF, 0x01] }

    /// What an unsynced tail of `file` reports as dropped: up to its last non-zero byte.
    func tail(_ file: [UInt8]) -> SegmentTail.Verdict {
        .unsyncedTail(garbageEnd: Int64(file.lastIndex { $0 != 0 }! + 1))
    }

    @Test func damageNothingVouchesForIsAnUnsyncedTail() throws {
        // The records after the damage are intact, but no synced-through record
        // claims them: a power loss may leave exactly this.
        let body = R.a + garbage + R.a + R.b
        let damage = start + R.a.count
        #expect(try classify(R.segment(body), at: damage) == tail(R.segment(body)))
        // Zeros after the damage were never data: not counted as dropped.
        #expect(try classify(R.segment(R.a + garbage + [UInt8](repeating: 0, count: 700)), at: damage)
                == .unsyncedTail(garbageEnd: Int64(damage + garbage.count)))
    }

    @Test func aLaterSyncedThroughPastTheDamageMakesItCorruption() throws {
        let damage = start + R.a.count
        let claimPast = R.record(.syncedThrough(offset: UInt64(damage + 1)))
        let body = R.a + garbage + R.a + claimPast
        #expect(try classify(R.segment(body), at: damage)
                == .corruption(vouchedBy: Int64(start + R.a.count + garbage.count + R.a.count)))
        // A claim at or before the damage vouches for nothing after it.
        let claimBefore = R.record(.syncedThrough(offset: UInt64(damage)))
        #expect(try classify(R.segment(R.a + garbage + claimBefore), at: damage) == tail(R.segment(R.a + garbage + claimBefore)))
        // A synced-through record with a bad checksum vouches for nothing.
        var broken = claimPast
        broken[12] ^= 0x40
        #expect(try classify(R.segment(R.a + garbage + broken), at: damage) == tail(R.segment(R.a + garbage + broken)))
    }

    @Test func sealedSegmentsAndChecksummedRecordsAreAlwaysCorruption() throws {
        let body = R.segment(R.a + garbage)
        #expect(try classify(body, at: start + R.a.count, newest: false) == .corruption(vouchedBy: nil))
        #expect(try classify(body, at: start + R.a.count, checksummed: true) == .corruption(vouchedBy: nil))
    }

    @Test func versionOneKeepsItsRule() throws {
        // Version 1 has no synced-through records: any valid record after the
        // damage makes it corruption; none, a torn tail.
        let v1 = SegmentHeader(sequence: 1, basePosition: 0, version: 1).encoded()
        let damage = 40 + R.a.count
        #expect(try classify(v1 + R.a + garbage + R.a, at: damage, version: 1) == .corruption(vouchedBy: Int64(damage + garbage.count)))
        #expect(try classify(v1 + R.a + garbage, at: damage, version: 1) == .unsyncedTail(garbageEnd: Int64(damage + garbage.count)))
        // A version 2 record type after the damage is not a valid version 1 record.
        #expect(try classify(v1 + R.a + garbage + R.b, at: damage, version: 1) == tail(v1 + R.a + garbage + R.b))
    }
}
