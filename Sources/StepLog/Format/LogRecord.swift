import Foundation

/// A sample version as written in a `sampleUpsert` record.
public struct SampleRecord: Hashable, Sendable {
    public var sample: StepSample
    public var fetchedAtMilliseconds: Int64
    /// Set only by compaction, which folds the synced marker into the version.
    public var isSynced: Bool

    public init(sample: StepSample, fetchedAtMilliseconds: Int64, isSynced: Bool = false) {
        self.sample = sample
        self.fetchedAtMilliseconds = fetchedAtMilliseconds
        self.isSynced = isSynced
    }
}

/// One decoded record. Payload layouts are in docs/FORMAT.md.
public enum LogRecord: Hashable, Sendable {
    case sampleUpsert(SampleRecord)
    case samplesSynced([UUID])
    case intervalStatus(SyncInterval)
    case intervalsCleared(atMilliseconds: Int64)
    case layeringRange(LayeringRange)
    case dailyHighScore(DailyHighScore)

    public var type: RecordType {
        switch self {
        case .sampleUpsert: .sampleUpsert
        case .samplesSynced: .samplesSynced
        case .intervalStatus: .intervalStatus
        case .intervalsCleared: .intervalsCleared
        case .layeringRange: .layeringRange
        case .dailyHighScore: .dailyHighScore
        }
    }

    /// Appends this record, framed, to `buffer`.
    public func append(to buffer: WriteBuffer) {
        switch self {
        case .sampleUpsert(let r):
            SamplePayload.appendRecord(r.sample, fetchedAt: r.fetchedAtMilliseconds, synced: r.isSynced, to: buffer)
        case .samplesSynced(let ids):
            RecordFrame.append(type: .samplesSynced, to: buffer) { b in
                b.append(UInt32(ids.count))
                for id in ids { b.append(UUIDBytes(id)) }
            }
        case .intervalStatus(let i):
            RecordFrame.append(type: .intervalStatus, to: buffer) { b in
                b.append(UUIDBytes(i.id))
                b.append(i.startMilliseconds)
                b.append(i.endMilliseconds)
                b.append(i.stepCount)
                b.append(i.status.rawValue)
            }
        case .intervalsCleared(let at):
            RecordFrame.append(type: .intervalsCleared, to: buffer) { b in b.append(at) }
        case .layeringRange(let r):
            RecordFrame.append(type: .layeringRange, to: buffer) { b in
                b.append(r.startMilliseconds)
                b.append(r.endMilliseconds)
                b.append(r.sourceFingerprint)
            }
        case .dailyHighScore(let s):
            RecordFrame.append(type: .dailyHighScore, to: buffer) { b in
                b.append(s.day)
                b.append(s.steps)
                b.append(s.recordedAtMilliseconds)
            }
        }
    }

    /// Decodes a payload whose frame checksum already matched. Returns a reason
    /// string when the payload does not have its type's shape.
    public static func decode(type rawType: UInt8, payload: UnsafeRawBufferPointer) -> Result<LogRecord, PayloadProblem> {
        guard let type = RecordType(rawValue: rawType) else { return .failure(PayloadProblem("unknown record type \(rawType)")) }
        var r = ByteReader(payload)
        switch type {
        case .sampleUpsert:
            return SamplePayload.decode(payload).map { .sampleUpsert($0) }
        case .samplesSynced:
            guard let n = r.readUInt32(), r.remaining == Int(n) * 16 else {
                return .failure(PayloadProblem("samples-synced payload of \(payload.count) bytes does not match its count"))
            }
            var ids: [UUID] = []
            ids.reserveCapacity(Int(n))
            for _ in 0..<n { ids.append(r.readUUID()!.uuid) }
            return .success(.samplesSynced(ids))
        case .intervalStatus:
            guard payload.count == 41, let id = r.readUUID(), let start = r.readInt64(), let end = r.readInt64(),
                  let steps = r.readInt64(), let code = r.readUInt8() else {
                return .failure(PayloadProblem("interval-status payload must be 41 bytes, found \(payload.count)"))
            }
            guard let status = IntervalStatus(rawValue: code) else {
                return .failure(PayloadProblem("interval status code \(code) is unknown"))
            }
            return .success(.intervalStatus(SyncInterval(id: id.uuid, startMilliseconds: start, endMilliseconds: end,
                                                         stepCount: steps, status: status)))
        case .intervalsCleared:
            guard payload.count == 8, let at = r.readInt64() else {
                return .failure(PayloadProblem("intervals-cleared payload must be 8 bytes, found \(payload.count)"))
            }
            return .success(.intervalsCleared(atMilliseconds: at))
        case .layeringRange:
            guard payload.count == 24, let start = r.readInt64(), let end = r.readInt64(), let source = r.readUInt64() else {
                return .failure(PayloadProblem("layering-range payload must be 24 bytes, found \(payload.count)"))
            }
            return .success(.layeringRange(LayeringRange(startMilliseconds: start, endMilliseconds: end, sourceFingerprint: source)))
        case .dailyHighScore:
            guard payload.count == 20, let day = r.readUInt32(), let steps = r.readInt64(), let at = r.readInt64() else {
                return .failure(PayloadProblem("daily-high-score payload must be 20 bytes, found \(payload.count)"))
            }
            return .success(.dailyHighScore(DailyHighScore(day: day, steps: steps, recordedAtMilliseconds: at)))
        }
    }
}

/// Why a checksummed payload does not have its type's shape.
public struct PayloadProblem: Error, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

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
        var flags: UInt8 = synced ? FormatConstants.sampleFlagSynced : 0
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

    @inline(__always)
    public static func startMilliseconds(_ payload: UnsafeRawBufferPointer) -> Int64 {
        Int64(littleEndian: payload.loadUnaligned(fromByteOffset: startOffset, as: Int64.self))
    }

    /// True when the lengths inside the payload add up to its size.
    @inline(__always)
    public static func isWellFormed(_ payload: UnsafeRawBufferPointer) -> Bool {
        let fixed = FormatConstants.samplePayloadFixedSize
        guard payload.count >= fixed else { return false }
        let bundle = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: bundleLengthOffset, as: UInt16.self)))
        let hasDevice = payload[flagsOffset] & FormatConstants.sampleFlagHasDeviceName != 0
        if !hasDevice { return payload.count == fixed + bundle }
        let deviceAt = fixed + bundle
        guard payload.count >= deviceAt + 2 else { return false }
        let device = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: deviceAt, as: UInt16.self)))
        return payload.count == deviceAt + 2 + device
    }

    public static func decode(_ payload: UnsafeRawBufferPointer) -> Result<SampleRecord, PayloadProblem> {
        guard isWellFormed(payload) else {
            return .failure(PayloadProblem("sample-upsert payload of \(payload.count) bytes is malformed"))
        }
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
        let sample = StepSample(id: id.uuid, startMilliseconds: start, endMilliseconds: end, count: Int(count),
                                sourceBundleId: bundle, sourceDeviceName: device)
        return .success(SampleRecord(sample: sample, fetchedAtMilliseconds: fetchedAt,
                                     isSynced: flags & FormatConstants.sampleFlagSynced != 0))
    }

    /// True when the stored version in `payload` has the same content as `s`
    /// (every field but fetchedAt and the synced flag), compared byte-wise.
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

extension LogRecord {
    /// Checks that a checksummed payload has its type's shape without building
    /// the record (cheap for samples, which replay never fully decodes).
    public static func decodeShape(type rawType: UInt8, payload: UnsafeRawBufferPointer) -> Result<Void, PayloadProblem> {
        if rawType == RecordType.sampleUpsert.rawValue {
            return SamplePayload.isWellFormed(payload)
                ? .success(()) : .failure(PayloadProblem("sample-upsert payload of \(payload.count) bytes is malformed"))
        }
        return decode(type: rawType, payload: payload).map { _ in () }
    }
}
