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
            "535445504c4f4700" + "0100" + "0000" + "0100000000000000" + "0000000000000000" + "0000000000000000" + "0b2677a8")
        let decoded = header.withUnsafeBytes { SegmentHeader.decode($0) }
        let header2 = try decoded.get()
        #expect(header2 == SegmentHeader(sequence: 1, basePosition: 0))
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
        let synced = GoldenExample.encoded(.samplesSynced([GoldenExample.sample.id]))
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
            .samplesSynced([]), .samplesSynced((0..<300).map { UUID.test($0) }),
            .intervalStatus(SyncInterval(id: .test(9), startMilliseconds: 1, endMilliseconds: 2, stepCount: 0, status: .empty)),
            .intervalsCleared(atMilliseconds: 77),
            .layeringRange(LayeringRange(startMilliseconds: -1, endMilliseconds: 1, sourceFingerprint: LayeringRange.fingerprint("mock"))),
            .dailyHighScore(DailyHighScore(day: 20261121, steps: 12_345, recordedAtMilliseconds: 9)),
        ]
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
        RecordFrame.append(type: .samplesSynced, to: b) { $0.append(UInt32(3)) }
        b.bytes.withUnsafeBytes { raw in
            guard case .record(let type, let payload, _) = RecordFrame.decode(raw, at: 0) else { Issue.record("no record"); return }
            guard case .failure = LogRecord.decode(type: type, payload: payload) else { Issue.record("accepted"); return }
        }
    }
}
