import Foundation

/// The `sampleUpsert` payload: the codec that writes one, and a view of a
/// checked one whose fields are read in place (replay, upsert comparison and
/// daily totals read millions of them; nothing is allocated until `record`).
///
///     0 uuid[16] | 16 start i64 | 24 end i64 | 32 count u32 | 36 fetchedAt i64
///     44 flags u8 | 45 bundleLen u16 | 47 bundle[bundleLen] | (deviceLen u16 | device[deviceLen])?
///     | (countFraction u16)?
///
/// `count` is the whole steps; `countFraction` (version 3, flag bit 4) the
/// thousandths past them, 1...999. A whole count has no fraction field, so
/// its bytes are those of version 2.
public struct SamplePayload {
    /// The payload's bytes (a view: valid only while the record's buffer is).
    public let bytes: UnsafeRawBufferPointer

    static let startOffset = 16
    static let endOffset = 24
    static let countOffset = 32
    static let fetchedAtOffset = 36
    static let flagsOffset = 44
    static let bundleLengthOffset = 45
    /// Bytes before the strings.
    static let fixedSize = FormatConstants.samplePayloadFixedSize

    /// A view of `bytes`, which `isWellFormed` accepted.
    @inline(__always)
    init(wellFormed bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// A view of `bytes` when they are a well-formed sample payload of a
    /// segment of format `version`.
    @inline(__always)
    public static func checked(_ bytes: UnsafeRawBufferPointer,
                               version: UInt16 = FormatConstants.formatVersion) -> Result<SamplePayload, PayloadProblem> {
        guard isWellFormed(bytes, version: version) else { return .failure(problem(bytes)) }
        return .success(SamplePayload(wellFormed: bytes))
    }

    /// True when the lengths inside the payload add up to its size, the
    /// UUID is not the nil UUID (which no writer stores: the index cannot
    /// hold it), and a count's fraction (only from version 3) is 1...999.
    @inline(__always)
    static func isWellFormed(_ payload: UnsafeRawBufferPointer, version: UInt16) -> Bool {
        guard payload.count >= fixedSize, !UUIDBytes(loadingFrom: payload, at: 0).isNil else { return false }
        let flags = payload[flagsOffset]
        var end = fixedSize + Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: bundleLengthOffset, as: UInt16.self)))
        if flags & FormatConstants.sampleFlagHasDeviceName != 0 {
            guard payload.count >= end + 2 else { return false }
            end += 2 + Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: end, as: UInt16.self)))
        }
        guard flags & FormatConstants.sampleFlagHasCountFraction != 0 else { return payload.count == end }
        guard version >= FormatConstants.countFractionSinceVersion, payload.count == end + 2 else { return false }
        let fraction = UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: end, as: UInt16.self))
        return fraction >= 1 && fraction <= 999
    }

    /// Why a payload is not well formed (when `isWellFormed` is false).
    static func problem(_ payload: UnsafeRawBufferPointer) -> PayloadProblem {
        if payload.count >= 16, UUIDBytes(loadingFrom: payload, at: 0).isNil { return .nilUUID(.sampleUpsert) }
        return .malformed(.sampleUpsert, size: payload.count)
    }

    // MARK: Fields, read in place

    @inline(__always)
    public var uuid: UUIDBytes { UUIDBytes(loadingFrom: bytes, at: 0) }

    @inline(__always)
    var flags: UInt8 { bytes[Self.flagsOffset] }

    /// Written by compaction (which folds the acknowledgement into the
    /// version) and by a relabelling upsert (which keeps the synced state).
    @inline(__always)
    public var isSynced: Bool { flags & FormatConstants.sampleFlagSynced != 0 }

    /// The origin label in flag bits 2...3.
    @inline(__always)
    public var origin: SampleOrigin {
        SampleOrigin(rawValue: (flags & FormatConstants.sampleOriginMask) >> FormatConstants.sampleOriginShift)!
    }

    @inline(__always)
    public var startMilliseconds: Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.startOffset, as: Int64.self)) }

    @inline(__always)
    public var endMilliseconds: Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.endOffset, as: Int64.self)) }

    /// The whole steps of the count.
    @inline(__always)
    public var count: UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.countOffset, as: UInt32.self)) }

    /// The thousandths past the whole steps (0 when the count is whole).
    @inline(__always)
    public var countFraction: UInt16 {
        guard flags & FormatConstants.sampleFlagHasCountFraction != 0 else { return 0 }
        return UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: bytes.count - 2, as: UInt16.self))
    }

    /// The count in thousandths of a step.
    @inline(__always)
    public var countThousandths: UInt64 { UInt64(count) * 1000 + UInt64(countFraction) }

    @inline(__always)
    public var fetchedAtMilliseconds: Int64 { Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.fetchedAtOffset, as: Int64.self)) }

    /// UTF-8 bytes of the bundle id.
    @inline(__always)
    public var sourceBundleId: UnsafeRawBufferPointer {
        let length = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: Self.bundleLengthOffset, as: UInt16.self)))
        return UnsafeRawBufferPointer(rebasing: bytes[Self.fixedSize..<(Self.fixedSize + length)])
    }

    /// UTF-8 bytes of the device name, or nil when the sample has none.
    @inline(__always)
    public var sourceDeviceName: UnsafeRawBufferPointer? {
        guard flags & FormatConstants.sampleFlagHasDeviceName != 0 else { return nil }
        let at = Self.fixedSize + sourceBundleId.count
        let length = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt16.self)))
        return UnsafeRawBufferPointer(rebasing: bytes[(at + 2)..<(at + 2 + length)])
    }

    /// The fields as a `SampleSpan` (no allocation).
    @inline(__always)
    public var span: SampleSpan {
        SampleSpan(id: uuid, origin: origin, startMilliseconds: startMilliseconds, endMilliseconds: endMilliseconds,
                   countThousandths: countThousandths, sourceBundleId: sourceBundleId, sourceDeviceName: sourceDeviceName)
    }

    /// The whole version, decoded (strings and all).
    public var record: SampleRecord {
        let sample = StepSample(id: uuid.uuid, startMilliseconds: startMilliseconds, endMilliseconds: endMilliseconds,
                                countThousandths: Int64(countThousandths), sourceBundleId: String(decoding: sourceBundleId, as: UTF8.self),
                                sourceDeviceName: sourceDeviceName.map { String(decoding: $0, as: UTF8.self) }, origin: origin)
        return SampleRecord(sample: sample, fetchedAtMilliseconds: fetchedAtMilliseconds, isSynced: isSynced)
    }

    /// True when this stored version has the same content as `s` (every
    /// field but fetchedAt, the synced flag and the origin), compared byte-wise.
    public func hasSameContent(as s: StepSample) -> Bool {
        guard startMilliseconds == s.startMilliseconds, endMilliseconds == s.endMilliseconds,
              countThousandths == UInt64(truncatingIfNeeded: s.countThousandths) else { return false }
        guard Self.equalUTF8(sourceBundleId, s.sourceBundleId) else { return false }
        switch (sourceDeviceName, s.sourceDeviceName) {
        case (nil, nil): return true
        case (let stored?, let name?): return Self.equalUTF8(stored, name)
        default: return false
        }
    }

    @inline(__always)
    private static func equalUTF8(_ bytes: UnsafeRawBufferPointer, _ string: String) -> Bool {
        var string = string
        return string.withUTF8 { utf8 in
            utf8.count == bytes.count && (utf8.count == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0)
        }
    }

    // MARK: Writing

    /// Appends a framed sample-upsert record. The hot path of every write:
    /// sizes are computed first, and fields are stored at their offsets.
    @inline(__always)
    public static func append(_ s: StepSample, fetchedAt: Int64, synced: Bool, to buffer: WriteBuffer) {
        var bundle = s.sourceBundleId
        var device = s.sourceDeviceName
        let bundleCount = bundle.utf8.count
        let deviceCount = device.map { $0.utf8.count }
        let fraction = UInt16(truncatingIfNeeded: s.countThousandths % 1000)
        let payloadSize = fixedSize + bundleCount + (deviceCount.map { 2 + $0 } ?? 0) + (fraction != 0 ? 2 : 0)
        RecordFrame.append(.sampleUpsert, payloadSize: payloadSize, to: buffer) { p in
            let id = UUIDBytes(s.id)
            p.storeBytes(of: id.high.bigEndian, as: UInt64.self)
            p.storeBytes(of: id.low.bigEndian, toByteOffset: 8, as: UInt64.self)
            p.storeBytes(of: s.startMilliseconds.littleEndian, toByteOffset: startOffset, as: Int64.self)
            p.storeBytes(of: s.endMilliseconds.littleEndian, toByteOffset: endOffset, as: Int64.self)
            p.storeBytes(of: UInt32(truncatingIfNeeded: s.countThousandths / 1000).littleEndian, toByteOffset: countOffset, as: UInt32.self)
            p.storeBytes(of: fetchedAt.littleEndian, toByteOffset: fetchedAtOffset, as: Int64.self)
            var flags: UInt8 = (synced ? FormatConstants.sampleFlagSynced : 0) | s.origin.rawValue << FormatConstants.sampleOriginShift
            if deviceCount != nil { flags |= FormatConstants.sampleFlagHasDeviceName }
            if fraction != 0 { flags |= FormatConstants.sampleFlagHasCountFraction }
            p.storeBytes(of: flags, toByteOffset: flagsOffset, as: UInt8.self)
            p.storeBytes(of: UInt16(bundleCount).littleEndian, toByteOffset: bundleLengthOffset, as: UInt16.self)
            var at = fixedSize
            bundle.withUTF8 { if $0.count > 0 { (p + at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
            at += bundleCount
            if let deviceCount {
                p.storeBytes(of: UInt16(deviceCount).littleEndian, toByteOffset: at, as: UInt16.self)
                at += 2
                device!.withUTF8 { if $0.count > 0 { (p + at).copyMemory(from: $0.baseAddress!, byteCount: $0.count) } }
                at += deviceCount
            }
            if fraction != 0 { p.storeBytes(of: fraction.littleEndian, toByteOffset: at, as: UInt16.self) }
        }
    }

    /// Sets the synced flag of the well-formed payload at `payload`, in
    /// place: how compaction folds an acknowledgement into the version it
    /// copies (the same bytes, one flag more).
    @inline(__always)
    static func setSynced(_ payload: UnsafeMutableRawPointer, _ synced: Bool = true) {
        let flags = payload.load(fromByteOffset: flagsOffset, as: UInt8.self)
        payload.storeBytes(of: synced ? flags | FormatConstants.sampleFlagSynced : flags & ~FormatConstants.sampleFlagSynced,
                           toByteOffset: flagsOffset, as: UInt8.self)
    }
}
