import StepLog

/// A sample's content hash, as the server computes it (`stepserver/digests.py`;
/// docs/RECONCILE.md): XXH64, seed 0, of
///
///     idLen:u8 id start:i64 end:i64 count:i64 bundleLen:u16 bundle (00 | 01 deviceLen:u16 device)
///     (countFraction:u16)?
///
/// little-endian, the id as the upload spells it (`uuidString`), instants in
/// nanoseconds since 1970 UTC, names as their UTF-8 bytes; `count` is the whole
/// steps and `countFraction` the thousandths past them (1-999), present only
/// when there are any, so a whole count's bytes are those digests kept before
/// counts had fractions. Two versions of a
/// sample hash alike only when every field the server keeps is equal; the
/// origin and fetchedAt are not content.
///
/// Keeps one buffer for the bytes: hashing millions of samples makes no
/// allocation each.
public struct SampleDigest {
    private var bytes: [UInt8] = []

    public init() { bytes.reserveCapacity(256) }

    /// The content hash of `sample`.
    public mutating func hash(_ sample: StepSample) -> UInt64 {
        bytes.removeAll(keepingCapacity: true)
        let id = sample.id.uuidString.utf8
        bytes.append(UInt8(id.count))
        bytes.append(contentsOf: id)
        append(sample.startMilliseconds &* 1_000_000)
        append(sample.endMilliseconds &* 1_000_000)
        append(Int64(sample.count))
        append(string: sample.sourceBundleId)
        if let device = sample.sourceDeviceName {
            bytes.append(1)
            append(string: device)
        } else {
            bytes.append(0)
        }
        appendFraction(sample.countFraction)
        return XXHash64.hash(bytes)
    }

    /// The content hash of a stored version, read from its record's bytes
    /// (what `hash(_:)` gives for the sample it holds, without making one).
    public mutating func hash(_ payload: SamplePayload) -> UInt64 {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(36)
        appendUUIDText(payload.uuid)
        append(payload.startMilliseconds &* 1_000_000)
        append(payload.endMilliseconds &* 1_000_000)
        append(Int64(payload.count))
        append(utf8: payload.sourceBundleId)
        if let device = payload.sourceDeviceName {
            bytes.append(1)
            append(utf8: device)
        } else {
            bytes.append(0)
        }
        appendFraction(Int(payload.countFraction))
        return XXHash64.hash(bytes)
    }

    /// The UTC day of a stored version (`day(_:)`).
    public static func day(_ payload: SamplePayload) -> Int64 {
        ISO8601.floorDivide(payload.startMilliseconds, 86_400_000).0
    }

    /// The content hash of one sample.
    public static func hash(_ sample: StepSample) -> UInt64 {
        var digest = SampleDigest()
        return digest.hash(sample)
    }

    /// The UTC day (days since 1970) a sample's digest is kept under: its start's.
    public static func day(_ sample: StepSample) -> Int64 {
        ISO8601.floorDivide(sample.startMilliseconds, 86_400_000).0
    }

    private mutating func append(_ value: Int64) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    /// `countFraction:u16` when the count has a fraction; nothing for a whole count.
    private mutating func appendFraction(_ thousandths: Int) {
        guard thousandths != 0 else { return }
        withUnsafeBytes(of: UInt16(thousandths).littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// `uuidString`'s 36 bytes (uppercase, dashes after bytes 4, 6, 8 and 10).
    private mutating func appendUUIDText(_ id: UUIDBytes) {
        for i in 0..<16 {
            if i == 4 || i == 6 || i == 8 || i == 10 { bytes.append(0x2D) }
            let byte = UInt8(truncatingIfNeeded: (i < 8 ? id.high >> (56 - 8 * i) : id.low >> (56 - 8 * (i - 8))))
            bytes.append(Self.hexDigits[Int(byte >> 4)])
            bytes.append(Self.hexDigits[Int(byte & 0x0F)])
        }
    }

    private mutating func append(utf8: UnsafeRawBufferPointer) {
        withUnsafeBytes(of: UInt16(truncatingIfNeeded: utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: utf8)
    }

    private mutating func append(string: String) {
        let utf8 = string.utf8
        withUnsafeBytes(of: UInt16(truncatingIfNeeded: utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: utf8)
    }
}
