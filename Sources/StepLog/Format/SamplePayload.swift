import Foundation

/// The `sampleUpsert` payload, with fast paths that read single fields without
/// decoding strings (replay and upsert comparison run on these).
///
///     0 uuid[16] | 16 start i64 | 24 end i64 | 32 count u32 | 36 fetchedAt i64
///     44 flags u8 | 45 bundleLen u16 | 47 bundle[bundleLen] | (deviceLen u16 | device[deviceLen])?
public enum SamplePayload {
    static let startOffset = 16
    static let endOffset = 24
    static let countOffset = 32
    static let fetchedAtOffset = 36
    static let flagsOffset = 44
    static let bundleLengthOffset = 45

    /// Appends a framed sample-upsert record. The hot path of every write:
    /// sizes are computed first, the buffer is reserved once, and fields are
    /// stored at their offsets.
    @inline(__always)
    public static func appendRecord(_ s: StepSample, fetchedAt: Int64, synced: Bool, to buffer: WriteBuffer) {
        var bundle = s.sourceBundleId
        var device = s.sourceDeviceName
        let bundleCount = bundle.utf8.count
        let deviceCount = device.map { $0.utf8.count }
        let payloadSize = FormatConstants.samplePayloadFixedSize + bundleCount + (deviceCount.map { 2 + $0 } ?? 0)
        let size = FormatConstants.recordHeaderSize + payloadSize
        buffer.reserve(size)
        let frame = buffer.storage + buffer.count
        let p = frame + FormatConstants.recordHeaderSize
        frame.storeBytes(of: UInt32(payloadSize).littleEndian, as: UInt32.self)
        frame.storeBytes(of: RecordType.sampleUpsert.rawValue, toByteOffset: 4, as: UInt8.self)
        let id = UUIDBytes(s.id)
        p.storeBytes(of: id.high.bigEndian, as: UInt64.self)
        p.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
        p.storeBytes(of: s.startMilliseconds.littleEndian, toByteOffset: startOffset, as: Int64.self)
        p.storeBytes(of: s.endMilliseconds.littleEndian, toByteOffset: endOffset, as: Int64.self)
        p.storeBytes(of: UInt32(truncatingIfNeeded: s.count).littleEndian, toByteOffset: countOffset, as: UInt32.self)
        p.storeBytes(of: fetchedAt.littleEndian, toByteOffset: fetchedAtOffset, as: Int64.self)
        var flags: UInt8 = (synced ? FormatConstants.sampleFlagSynced : 0) | s.origin.rawValue << FormatConstants.sampleOriginShift
        if deviceCount != nil { flags |= FormatConstants.sampleFlagHasDeviceName }
        p.storeBytes(of: flags, toByteOffset: flagsOffset, as: UInt8.self)
        p.storeBytes(of: UInt16(bundleCount).littleEndian, toByteOffset: bundleLengthOffset, as: UInt16.self)
        var at = FormatConstants.samplePayloadFixedSize
        bundle.withUTF8 { if $0.count > 0 { (p + at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        at += bundleCount
        if let deviceCount {
            p.storeBytes(of: UInt16(deviceCount).littleEndian, toByteOffset: at, as: UInt16.self)
            at += 2
            device!.withUTF8 { if $0.count > 0 { (p + at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
        }
        var crc = CRC32C.extend(0, UnsafeRawBufferPointer(start: frame + 4, count: 1))
        crc = CRC32C.extend(crc, UnsafeRawBufferPointer(start: p, count: payloadSize))
        frame.storeBytes(of: CRC32C.mask(crc).littleEndian, toByteOffset: 5, as: UInt32.self)
        buffer.count += size
    }

    /// The sample's UUID (payload must be at least 16 bytes; the replay checks
    /// the shape with `isWellFormed` first).
    @inline(__always)
    public static func uuid(_ payload: UnsafeRawBufferPointer) -> UUIDBytes {
        UUIDBytes(loadingFrom: payload, at: 0)
    }

    @inline(__always)
    public static func flags(_ payload: UnsafeRawBufferPointer) -> UInt8 { payload[flagsOffset] }

    /// The origin label in flag bits 2...3.
    @inline(__always)
    public static func origin(_ payload: UnsafeRawBufferPointer) -> SampleOrigin {
        SampleOrigin(rawValue: (payload[flagsOffset] & FormatConstants.sampleOriginMask) >> FormatConstants.sampleOriginShift)!
    }

    @inline(__always)
    public static func startMilliseconds(_ payload: UnsafeRawBufferPointer) -> Int64 {
        Int64(littleEndian: payload.loadUnaligned(fromByteOffset: startOffset, as: Int64.self))
    }

    /// True when the lengths inside the payload add up to its size and the
    /// UUID is not the nil UUID (which no writer stores: the index cannot hold it).
    @inline(__always)
    public static func isWellFormed(_ payload: UnsafeRawBufferPointer) -> Bool {
        let fixed = FormatConstants.samplePayloadFixedSize
        guard payload.count >= fixed, !uuid(payload).isNil else { return false }
        let bundle = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: bundleLengthOffset, as: UInt16.self)))
        let hasDevice = payload[flagsOffset] & FormatConstants.sampleFlagHasDeviceName != 0
        if !hasDevice { return payload.count == fixed + bundle }
        let deviceAt = fixed + bundle
        guard payload.count >= deviceAt + 2 else { return false }
        let device = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: deviceAt, as: UInt16.self)))
        return payload.count == deviceAt + 2 + device
    }

    /// Why a payload is not well formed (when `isWellFormed` is false).
    public static func problem(_ payload: UnsafeRawBufferPointer) -> PayloadProblem {
        if payload.count >= 16, uuid(payload).isNil { return PayloadProblem("sample-upsert record holds the nil UUID") }
        return PayloadProblem("sample-upsert payload of \(payload.count) bytes is malformed")
    }

    public static func decode(_ payload: UnsafeRawBufferPointer) -> Result<SampleRecord, PayloadProblem> {
        guard isWellFormed(payload) else { return .failure(problem(payload)) }
        var r = ByteReader(payload)
        let id = r.readUUID()!
        let start = r.readInt64()!
        let end = r.readInt64()!
        let count = r.readUInt32()!
        let fetchedAt = r.readInt64()!
        let flags = r.readUInt8()!
        let bundleLength = r.readUInt16()!
        let bundle = r.readString(Int(bundleLength))!
        var device: String?
        if flags & FormatConstants.sampleFlagHasDeviceName != 0 {
            let n = r.readUInt16()!
            device = r.readString(Int(n))!
        }
        let origin = SampleOrigin(rawValue: (flags & FormatConstants.sampleOriginMask) >> FormatConstants.sampleOriginShift)!
        let sample = StepSample(id: id.uuid, startMilliseconds: start, endMilliseconds: end, count: Int(count),
                                sourceBundleId: bundle, sourceDeviceName: device, origin: origin)
        return .success(SampleRecord(sample: sample, fetchedAtMilliseconds: fetchedAt,
                                     isSynced: flags & FormatConstants.sampleFlagSynced != 0))
    }

    /// True when the stored version in `payload` has the same content as `s`
    /// (every field but fetchedAt, the synced flag and the origin), compared byte-wise.
    public static func hasSameContent(_ payload: UnsafeRawBufferPointer, as s: StepSample) -> Bool {
        var r = ByteReader(payload, offset: startOffset)
        guard r.readInt64() == s.startMilliseconds, r.readInt64() == s.endMilliseconds,
              r.readUInt32() == UInt32(truncatingIfNeeded: s.count) else { return false }
        _ = r.readInt64()
        guard let flags = r.readUInt8() else { return false }
        let storedHasDevice = flags & FormatConstants.sampleFlagHasDeviceName != 0
        guard storedHasDevice == (s.sourceDeviceName != nil) else { return false }
        guard let n = r.readUInt16(), let bundle = r.readBytes(Int(n)), equalUTF8(bundle, s.sourceBundleId) else { return false }
        if let name = s.sourceDeviceName {
            guard let m = r.readUInt16(), let device = r.readBytes(Int(m)), equalUTF8(device, name) else { return false }
        }
        return true
    }

    @inline(__always)
    private static func equalUTF8(_ bytes: UnsafeRawBufferPointer, _ string: String) -> Bool {
        var string = string
        return string.withUTF8 { utf8 in
            utf8.count == bytes.count && (utf8.count == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0)
        }
    }
}
