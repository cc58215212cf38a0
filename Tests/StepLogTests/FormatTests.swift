import Foundation
import Testing
@testable import StepLog

/// The worked example of docs/FORMAT.md: these bytes are the format. If a test
/// here fails, the code changed the format; a format change needs a new
/// version number, not new golden bytes.
enum GoldenExample {
    static let sample = StepSample(
        id: UUID(uuidString: "6F9619FF-8B86-D011-B42D-00C04FC964FF")!,
        startMilliseconds: 1_705_314_600_000, // 2024-01-15T10:30:00Z
        endMilliseconds: 1_705_314_660_000,   // 2024-01-15T10:31:00Z
        count: 45, sourceBundleId: "com.apple.health", sourceDeviceName: "iPhone 15 Pro")
    static let fetchedAt: Int64 = 1_705_762_800_000 // 2024-01-20T15:00:00Z

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        bytes.map { String(format: "%02x", $0) }.joined()
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var result: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            result.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return result
    }

    static func encoded(_ record: LogRecord) -> [UInt8] {
        let b = WriteBuffer()
        record.append(to: b)
        return Array(b.bytes)
    }
}

@Suite struct CRC32CTests {
    @Test func knownVectors() {
        // The CRC-32C check value, and the RFC 3720 (iSCSI) test vectors.
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum([]) == 0)
    }

    @Test func extendEqualsWhole() {
        var rng = SeededGenerator(seed: 7)
        for length in [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4099] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            for split in [0, length / 3, length] {
                let a = bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<split])) }
                let whole = bytes.withUnsafeBytes { CRC32C.extend(a, UnsafeRawBufferPointer(rebasing: $0[split...])) }
                #expect(whole == CRC32C.checksum(bytes))
            }
        }
    }

    @Test func maskRoundTripsAndDiffers() {
        for crc: UInt32 in [0, 1, 0xE306_9283, 0xFFFF_FFFF] {
            #expect(CRC32C.unmask(CRC32C.mask(crc)) == crc)
            #expect(CRC32C.mask(crc) != crc)
        }
    }
}

@Suite struct GoldenVectorTests {
    @Test func segmentHeader() throws {
        let header = SegmentHeader(sequence: 1, basePosition: 0).encoded()
        #expect(header.count == FormatConstants.segmentHeaderSize)
        #expect(GoldenExample.hex(header) ==
            "535445504c4f4700" + "0300" + "0000" + "0100000000000000" + "0000000000000000" + "0000000000000000"
            + "0000000000000000" + "74dc15c8") // range end 0, masked CRC-32C of the 44 bytes before it
        // Version 2's header, which this build still reads (its layout is version 3's).
        let v2 = GoldenExample.bytes("535445504c4f4700" + "0200" + "0000" + "0100000000000000" + "0000000000000000"
                                     + "0000000000000000" + "0000000000000000" + "dd806df5")
        #expect(try v2.withUnsafeBytes { try SegmentHeader.decode($0).get() } == SegmentHeader(sequence: 1, basePosition: 0, version: 2))
        let decoded = try header.withUnsafeBytes { try SegmentHeader.decode($0).get() }
        #expect(decoded == SegmentHeader(sequence: 1, basePosition: 0))
        #expect(decoded.dataStart == 4096)
        let block = SegmentHeader(sequence: 1, basePosition: 0).encodedBlock()
        #expect(block.count == 4096 && Array(block.prefix(48)) == header && block.dropFirst(48).allSatisfy { $0 == 0 })
        // A range end round-trips (written 0 today; a later writer may reserve one).
        let reserved = SegmentHeader(sequence: 7, basePosition: 1 << 20, rangeEnd: 3 << 20)
        #expect(try reserved.encoded().withUnsafeBytes { try SegmentHeader.decode($0).get() } == reserved)
    }

    @Test func versionOneHeaderStillDecodes() throws {
        // The version 1 worked example of docs/FORMAT.md: 40 bytes, records at once.
        let v1 = GoldenExample.bytes("535445504c4f4700" + "0100" + "0000" + "0100000000000000" + "0000000000000000"
                                     + "0000000000000000" + "0b2677a8")
        let header = try v1.withUnsafeBytes { try SegmentHeader.decode($0).get() }
        #expect(header == SegmentHeader(sequence: 1, basePosition: 0, version: 1))
        #expect(header.dataStart == 40 && header.size == 40)
        #expect(header.encoded() == v1)
        // Versions this build does not know are named as such, not called damage.
        var v4 = SegmentHeader(sequence: 1, basePosition: 0, version: 4).encoded()
        #expect(v4.withUnsafeBytes { SegmentHeader.decode($0) } == .failure(.unsupportedVersion(4)))
        v4[20] ^= 1
        #expect(v4.withUnsafeBytes { SegmentHeader.decode($0) } == .failure(.checksumMismatch))
    }

    @Test func versionTwoRecords() {
        let id = GoldenExample.sample.id
        // A tombstone: deleted 2024-01-21T08:00:00Z.
        #expect(GoldenExample.hex(GoldenExample.encoded(.sampleDeleted(id: id, deletedAtMilliseconds: 1_705_824_000_000))) ==
            "18000000" + "07" + "e2f49de0" + "6f9619ff8b86d011b42d00c04fc964ff" + "0098082b8d010000")
        #expect(GoldenExample.hex(GoldenExample.encoded(.syncedThrough(offset: 4608))) ==
            "08000000" + "08" + "6e8a8714" + "0012000000000000")
        #expect(GoldenExample.hex(GoldenExample.encoded(.padding(length: 12))) ==
            "0c000000" + "09" + "c00a33f3" + String(repeating: "00", count: 12))
        #expect(SourceFamily.fingerprint("export") == 0xEDB2_D397_5516_1F73)
        #expect(GoldenExample.hex(GoldenExample.encoded(.sourceAnchor(family: SourceFamily.fingerprint("export"),
                                                                       anchor: Array("2024-01-20 15:00:00 +0000".utf8)))) ==
            "25000000" + "0a" + "02ab7563" + "731f165597d3b2ed" + "19000000" + "323032342d30312d32302031353a30303a3030202b30303030")
        // Origin "export" (2) in flag bits 2...3, beside bit 0 (a device name follows).
        var exported = GoldenExample.sample
        exported.origin = .export
        #expect(GoldenExample.hex(GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: exported, fetchedAtMilliseconds: GoldenExample.fetchedAt)))) ==
            "4e000000" + "01" + "9e7e8217" + "6f9619ff8b86d011b42d00c04fc964ff" + "40c4ab0c8d010000" + "a0aeac0c8d010000"
            + "2d000000" + "80c162278d010000" + "09" + "1000" + "636f6d2e6170706c652e6865616c7468" + "0d00" + "6950686f6e652031352050726f")
    }

    /// Version 3: a count with a fraction (2741.7 steps) keeps its whole
    /// steps in `count` and its thousandths (700) in a u16 after the strings,
    /// flagged by bit 4; a whole count's record is version 2's, byte for byte.
    @Test func sampleUpsertWithAFraction() throws {
        var sample = GoldenExample.sample
        sample.origin = .export
        sample.countThousandths = 2_741_700
        let bytes = GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: sample, fetchedAtMilliseconds: GoldenExample.fetchedAt)))
        #expect(GoldenExample.hex(bytes) ==
            "50000000" + "01" + "35367ec1" + "6f9619ff8b86d011b42d00c04fc964ff" + "40c4ab0c8d010000" + "a0aeac0c8d010000"
            + "b50a0000" + "80c162278d010000" + "19" + "1000" + "636f6d2e6170706c652e6865616c7468" + "0d00" + "6950686f6e652031352050726f"
            + "bc02") // count 2741, flags 0x19 (device, export, fraction), fraction 700
        let payload = Array(bytes.dropFirst(FormatConstants.recordHeaderSize))
        try payload.withUnsafeBytes { p in
            let view = try SamplePayload.checked(p).get()
            #expect(view.count == 2_741 && view.countFraction == 700 && view.countThousandths == 2_741_700)
            #expect(view.record.sample == sample && view.hasSameContent(as: sample))
            var whole = sample
            whole.countThousandths = 2_741_000
            #expect(!view.hasSameContent(as: whole))
            // A fraction in a version 2 segment is corruption, not a reading.
            guard case .failure = RecordView.decode(type: RecordType.sampleUpsert.rawValue, payload: p, version: 2) else {
                Issue.record("a version 2 segment took a fraction"); return
            }
        }
        // A fraction of 0 or of 1000 or more is malformed (a whole count has none).
        for bad: UInt16 in [0, 1_000, 65_535] {
            var damaged = payload
            damaged[damaged.count - 2] = UInt8(bad & 0xFF)
            damaged[damaged.count - 1] = UInt8(bad >> 8)
            damaged.withUnsafeBytes { p in
                guard case .failure = SamplePayload.checked(p) else { Issue.record("fraction \(bad) was taken"); return }
            }
        }
        // Whole counts: no flag, no field, the bytes of version 2.
        sample.countThousandths = 45_000
        #expect(GoldenExample.hex(GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: sample, fetchedAtMilliseconds: GoldenExample.fetchedAt))))
                == "4e000000019e7e82176f9619ff8b86d011b42d00c04fc964ff40c4ab0c8d010000a0aeac0c8d0100002d00000080c162278d010000"
                + "091000636f6d2e6170706c652e6865616c74680d006950686f6e652031352050726f")
    }

    @Test func sampleUpsertRecord() {
        let bytes = GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: GoldenExample.sample, fetchedAtMilliseconds: GoldenExample.fetchedAt)))
        #expect(GoldenExample.hex(bytes) ==
            "4e000000" + "01" + "bf4b4ba2"   // length 78, type 1, masked crc
            + "6f9619ff8b86d011b42d00c04fc964ff" // uuid
            + "40c4ab0c8d010000" + "a0aeac0c8d010000" // start, end (ms since 1970)
            + "2d000000" + "80c162278d010000"   // count 45, fetchedAt
            + "01" + "1000" + "636f6d2e6170706c652e6865616c7468" // flags (has device), "com.apple.health"
            + "0d00" + "6950686f6e652031352050726f") // "iPhone 15 Pro"
    }

    @Test func otherRecords() {
        let synced = GoldenExample.encoded(.samplesAcknowledged([GoldenExample.sample.id]))
        #expect(GoldenExample.hex(synced) == "14000000" + "02" + "a853c3ca" + "01000000" + "6f9619ff8b86d011b42d00c04fc964ff")
        let interval = SyncInterval(id: UUID(uuidString: "00000000-0000-4000-8000-000000000001")!,
                                    startMilliseconds: 1_705_314_600_000, endMilliseconds: 1_705_401_000_000,
                                    stepCount: 9_876, status: .fetched)
        #expect(GoldenExample.hex(GoldenExample.encoded(.intervalStatus(interval))) ==
            "29000000" + "03" + "fddb6997" + "00000000000040008000000000000001"
            + "40c4ab0c8d010000" + "4020d2118d010000" + "9426000000000000" + "03")
        #expect(GoldenExample.hex(GoldenExample.encoded(.intervalsCleared(atMilliseconds: 0))) ==
            "08000000" + "04" + "2db5a3f7" + "0000000000000000")
        // FNV-1a 64 test vectors (the layering range's source fingerprint).
        #expect(LayeringRange.fingerprint("") == 0xCBF2_9CE4_8422_2325)
        #expect(LayeringRange.fingerprint("a") == 0xAF63_DC4C_8601_EC8C)
        #expect(LayeringRange.fingerprint("foobar") == 0x85944171F73967E8)
    }

    @Test func everyRecordRoundTrips() throws {
        let records: [LogRecord] = [
            .sampleUpsert(SampleRecord(sample: GoldenExample.sample, fetchedAtMilliseconds: 5, isSynced: true)),
            .sampleUpsert(SampleRecord(sample: StepSample(id: .test(1), startMilliseconds: -5, endMilliseconds: -5, count: 0,
                                                          sourceBundleId: "", sourceDeviceName: nil), fetchedAtMilliseconds: 0)),
            .sampleUpsert(SampleRecord(sample: StepSample(id: .test(2), startMilliseconds: 0, endMilliseconds: 1, count: Int(UInt32.max),
                                                          sourceBundleId: "Simon’s\u{00A0}iPhone", sourceDeviceName: ""), fetchedAtMilliseconds: 0)),
            .samplesAcknowledged([]), .samplesAcknowledged((0..<300).map { UUID.test($0) }),
            .intervalStatus(SyncInterval(id: .test(9), startMilliseconds: 1, endMilliseconds: 2, stepCount: 0, status: .empty)),
            .intervalsCleared(atMilliseconds: 77),
            .layeringRange(LayeringRange(startMilliseconds: -1, endMilliseconds: 1, sourceFingerprint: LayeringRange.fingerprint("mock"))),
            .dailyHighScore(DailyHighScore(day: 20261121, steps: 12_345, recordedAtMilliseconds: 9)),
            .sampleDeleted(id: .test(3), deletedAtMilliseconds: -1),
            .syncedThrough(offset: 4096), .syncedThrough(offset: .max),
            .padding(length: 0), .padding(length: 503),
            .sourceAnchor(family: 1, anchor: []), .sourceAnchor(family: .max, anchor: [UInt8](repeating: 0xAB, count: FormatConstants.maxAnchorBytes)),
        ] + SampleOrigin.allCases.map { origin in
            .sampleUpsert(SampleRecord(sample: StepSample(id: .test(4), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b",
                                                          sourceDeviceName: nil, origin: origin), fetchedAtMilliseconds: 0, isSynced: origin == .live))
        }
        for record in records {
            let bytes = GoldenExample.encoded(record)
            try bytes.withUnsafeBytes { raw throws in
                guard case .record(let type, let payload, let size) = RecordFrame.decode(raw, at: 0) else {
                    Issue.record("\(record.type) did not decode"); return
                }
                #expect(size == bytes.count)
                #expect(type == record.type.rawValue)
                let decoded = try LogRecord.decode(type: type, payload: payload).get()
                #expect(decoded == record)
            }
        }
    }
}

@Suite struct RecordFrameErrorTests {
    let good = GoldenExample.encoded(.sampleUpsert(SampleRecord(sample: GoldenExample.sample, fetchedAtMilliseconds: 1)))

    func decode(_ bytes: [UInt8]) -> SegmentDamage? {
        bytes.withUnsafeBytes { SegmentDamage(RecordFrame.decode($0, at: 0)) }
    }

    @Test func truncatedHeaderAtEveryShortLength() {
        for n in 0..<FormatConstants.recordHeaderSize {
            #expect(decode(Array(good[0..<n])) == .truncatedHeader(available: n))
        }
    }

    @Test func truncatedPayloadAtEveryShortLength() {
        for n in FormatConstants.recordHeaderSize..<good.count {
            #expect(decode(Array(good[0..<n])) == .truncatedPayload(declared: good.count - 9, available: n - 9))
        }
    }

    @Test func impossibleLength() {
        var bad = good
        bad[3] = 0x7F
        #expect(decode(bad) == .impossibleLength(0x7F00_004E))
    }

    @Test func everySingleBitFlipIsCaught() {
        for byte in 0..<good.count {
            for bit in 0..<8 {
                var bad = good
                bad[byte] ^= UInt8(1 << bit)
                #expect(decode(bad) != nil, "flip of bit \(bit) in byte \(byte) went unnoticed")
            }
        }
    }

    @Test func zeroFilledSpaceIsNeverARecord() {
        #expect(decode([UInt8](repeating: 0, count: 64)) != nil)
    }

    @Test func malformedPayloadWithGoodChecksum() {
        // A samples-synced record whose count disagrees with its size.
        let b = WriteBuffer()
        RecordFrame.append(type: .samplesAcknowledged, to: b) { $0.append(UInt32(3)) }
        b.bytes.withUnsafeBytes { raw in
            guard case .record(let type, let payload, _) = RecordFrame.decode(raw, at: 0) else { Issue.record("no record"); return }
            guard case .failure = LogRecord.decode(type: type, payload: payload) else { Issue.record("accepted"); return }
        }
    }
}

@Suite struct PayloadShapeTests {
    func decode(_ type: UInt8, _ payload: [UInt8]) -> Result<LogRecord, PayloadProblem> {
        payload.withUnsafeBytes { LogRecord.decode(type: type, payload: $0) }
    }

    @Test func everyUndefinedTypeIsRefused() {
        for code in [UInt8(0)] + Array(UInt8(14)...UInt8(255)) {
            #expect(decode(code, []) == .failure(.unknownType(code)))
            #expect(PayloadProblem.unknownType(code).description == "unknown record type \(code)")
            #expect(!RecordType.isDefined(code, inVersion: 2))
            #expect(!RecordType.isDefined(code, inVersion: FormatConstants.formatVersion))
        }
        // Version 1 segments know only types 1...6; versions 2 and 3 every type 1...13 (11-13 included).
        for code in UInt8(1)...UInt8(13) {
            #expect(RecordType.isDefined(code, inVersion: 1) == (code <= 6))
            #expect(RecordType.isDefined(code, inVersion: 2))
            #expect(RecordType.isDefined(code, inVersion: 3))
        }
    }

    /// Types 12 and 13 (docs/RECONCILE.md), byte for byte against an independent
    /// encoder (CRC-32C computed bit by bit in Python, docs/FORMAT.md).
    @Test func destinationAndUnacknowledgedBytes() throws {
        let id = GoldenExample.sample.id
        let destination = StoreDestination(serverId: "S1", user: "alice", url: "http://127.0.0.1:8000", uploader: id,
                                           recordedAtMilliseconds: 1_705_762_800_000, provenEqualAtMilliseconds: 1_705_824_000_000)
        let d = GoldenExample.encoded(.destination(destination))
        #expect(GoldenExample.hex(d) == "40000000" + "0c" + "8d90a64d" + "80c162278d010000" + "0098082b8d010000"
                + "6f9619ff8b86d011b42d00c04fc964ff" + "02" + "5331" + "05" + "616c696365" + "1500" + "687474703a2f2f3132372e302e302e313a38303030")
        #expect(decode(12, Array(d[FormatConstants.recordHeaderSize...])) == .success(.destination(destination)))
        let entries = [SampleRejection(id: id, rejectedAtMilliseconds: 1_705_824_000_000, reason: ""),
                       SampleRejection(id: UUID(uuidString: "00000000-0000-4000-8000-000000000001")!, rejectedAtMilliseconds: 1_705_824_000_000, reason: "held")]
        let u = GoldenExample.encoded(.samplesUnacknowledged(entries))
        #expect(GoldenExample.hex(u) == "3c000000" + "0d" + "cfa0bc50" + "02000000"
                + "6f9619ff8b86d011b42d00c04fc964ff" + "0098082b8d010000" + "0000"
                + "00000000000040008000000000000001" + "0098082b8d010000" + "0400" + "68656c64")
        let payload = Array(u[FormatConstants.recordHeaderSize...])
        #expect(decode(13, payload) == .success(.samplesUnacknowledged(entries)))
        #expect(decode(13, Array(payload.dropLast())) == .failure(.malformed(.samplesUnacknowledged, size: payload.count - 1)))
        #expect(decode(12, Array(d[FormatConstants.recordHeaderSize...].dropLast())) == .failure(.malformed(.destination, size: d.count - 10)))
        #expect(decode(12, []) == .failure(.malformed(.destination, size: 0)))
    }

    @Test func samplesRejectedRoundTripsAndRefusesBadShapes() throws {
        let list = [SampleRejection(id: UUID(), rejectedAtMilliseconds: 1_700_000_000_123, reason: "count: must be between 0 and 1000000 (got -1)"),
                    SampleRejection(id: UUID(), rejectedAtMilliseconds: -5, reason: "")]
        let buffer = WriteBuffer(capacity: 256)
        LogRecord.samplesRejected(list).append(to: buffer)
        let bytes = Array(buffer.bytes)
        #expect(bytes[4] == 11)
        let payload = Array(bytes[FormatConstants.recordHeaderSize...])
        #expect(payload.count == 4 + (16 + 8 + 2) * 2 + list[0].reason.utf8.count)
        #expect(decode(11, payload) == .success(.samplesRejected(list)))
        #expect(decode(11, []) == .failure(.malformed(.samplesRejected, size: 0)))
        #expect(PayloadProblem.malformed(.samplesRejected, size: 0).description == "samples-rejected payload of 0 bytes is malformed")
        #expect(decode(11, Array(payload.dropLast())) == .failure(.malformed(.samplesRejected, size: payload.count - 1)))
        #expect(decode(11, payload + [0]) == .failure(.malformed(.samplesRejected, size: payload.count + 1)))
        // A reason longer than the limit is cut at a character boundary.
        let long = String(repeating: "é", count: 600) // 1,200 bytes
        let clipped = RejectionPayload.clipped(long)
        #expect(clipped.utf8.count == 1_024 && clipped == String(repeating: "é", count: 512))
    }

    @Test func versionTwoShapes() {
        #expect(decode(7, [UInt8](repeating: 1, count: 23)) == .failure(.wrongSize(.sampleDeleted, expected: 24, found: 23)))
        #expect(decode(7, [UInt8](repeating: 1, count: 25)) == .failure(.wrongSize(.sampleDeleted, expected: 24, found: 25)))
        #expect(decode(7, [UInt8](repeating: 0, count: 24)) == .failure(.nilUUID(.sampleDeleted)))
        #expect(decode(8, [UInt8](repeating: 0, count: 7)) == .failure(.wrongSize(.syncedThrough, expected: 8, found: 7)))
        #expect(decode(8, [UInt8](repeating: 0, count: 9)) == .failure(.wrongSize(.syncedThrough, expected: 8, found: 9)))
        #expect(PayloadProblem.wrongSize(.syncedThrough, expected: 8, found: 9).description == "synced-through payload must be 8 bytes, found 9")
        var padding = [UInt8](repeating: 0, count: 40)
        #expect(decode(9, padding) == .success(.padding(length: 40)))
        padding[17] = 1
        #expect(decode(9, padding) == .failure(.nonZeroPadding(at: 17)))
        #expect(PayloadProblem.nonZeroPadding(at: 17).description == "padding holds a non-zero byte at payload offset 17")
        func anchor(_ declared: UInt32, _ actual: Int) -> [UInt8] {
            withUnsafeBytes(of: UInt64(5).littleEndian, Array.init) + withUnsafeBytes(of: declared.littleEndian, Array.init)
                + [UInt8](repeating: 7, count: actual)
        }
        #expect(decode(10, anchor(3, 3)) == .success(.sourceAnchor(family: 5, anchor: [7, 7, 7])))
        #expect(decode(10, anchor(3, 4)) == .failure(.malformed(.sourceAnchor, size: 16)))
        #expect(decode(10, anchor(4, 3)) == .failure(.malformed(.sourceAnchor, size: 15)))
        #expect(decode(10, anchor(65_537, 65_537)) == .failure(.malformed(.sourceAnchor, size: 12 + 65_537)))
        #expect(decode(10, [1, 2, 3]) == .failure(.malformed(.sourceAnchor, size: 3)))
    }
}

/// The worked example of docs/FORMAT.md, written by the store itself: where
/// padding, synced-through records and the closing record go is the format
/// too. Expected bytes come from an independent encoder (a few lines of
/// Python beside CRC-32C computed bit by bit), as the record vectors do.
@Suite struct WorkedExampleTests {
    @Test func aStoresFirstSegmentByteForByte() throws {
        let tmp = TemporaryDirectory()
        let store = try StepLogStore.open(tmp.path)
        var sample = GoldenExample.sample
        sample.origin = .export
        try store.upsert([sample], fetchedAt: Date(timeIntervalSince1970: 1_705_762_800))
        try store.sync()                                    // padding to 4608
        try store.markSynced(try store.unsyncedSamples(limit: 10)) // synced-through 4608, then the acknowledgement
        try store.delete([sample.id], at: Date(timeIntervalSince1970: 1_705_824_000))
        try store.sync()                                    // padding to 5120
        try store.recordSourceAnchor(family: "export", anchor: Array("2024-01-20 15:00:00 +0000".utf8))
        try store.close()                                   // padding to 5632, then a closing synced-through

        let zeros = { (n: Int) in String(repeating: "00", count: n) }
        let expected = GoldenExample.bytes(
            "535445504c4f470003000000010000000000000000000000000000000000000000000000000000000000000074dc15c8" + zeros(4096 - 48)
            // 4096: the sample (origin export)
            + "4e000000019e7e82176f9619ff8b86d011b42d00c04fc964ff40c4ab0c8d010000a0aeac0c8d0100002d00000080c162278d010000"
            + "091000636f6d2e6170706c652e6865616c74680d006950686f6e652031352050726f"
            // 4183: padding, 416 zero bytes of payload
            + "a001000009907a3216" + zeros(416)
            // 4608: synced through 4608; the acknowledgement; the tombstone
            + "08000000086e8a87140012000000000000"
            + "1400000002a853c3ca010000006f9619ff8b86d011b42d00c04fc964ff"
            + "1800000007e2f49de06f9619ff8b86d011b42d00c04fc964ff0098082b8d010000"
            // 4687: padding, 424 zeros; 5120: synced through 5120; the anchor
            + "a801000009943fe6b4" + zeros(424)
            + "0800000008335f09ed0014000000000000"
            + "250000000a02ab7563731f165597d3b2ed19000000323032342d30312d32302031353a30303a3030202b30303030"
            // 5183: padding, 440 zeros; 5632: the closing synced through 5632
            + "b801000009b5c08d44" + zeros(440)
            + "08000000082fbf2a9c0016000000000000")
        let actual = readFile(tmp.sub("000000000001.log"))
        #expect(actual.count == 5_649)
        if let first = zip(actual, expected).enumerated().first(where: { $0.element.0 != $0.element.1 })?.offset {
            Issue.record("first difference at byte \(first)")
        }
        #expect(actual == expected)
    }
}
