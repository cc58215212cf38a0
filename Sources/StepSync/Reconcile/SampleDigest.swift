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
/// A `SampleDigest` keeps one buffer for a sample's bytes between calls; a
/// stored version's (`hash(_: SamplePayload)`) are written on the stack.
/// Hashing millions makes no allocation each.
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
    /// (what `hash(_:)` gives for the sample it holds, without making one):
    /// the content is written into a buffer on the stack, so hashing every
    /// version of a store allocates nothing.
    public static func hash(_ payload: SamplePayload) -> UInt64 {
        let bundle = payload.sourceBundleId, device = payload.sourceDeviceName, fraction = payload.countFraction
        let size = 64 + bundle.count + (device.map { 2 + $0.count } ?? 0) + (fraction != 0 ? 2 : 0)
        return withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            var content = ContentWriter(buffer.baseAddress!)
            content.byte(36)
            content.uuidText(payload.uuid)
            content.int64(payload.startMilliseconds &* 1_000_000)
            content.int64(payload.endMilliseconds &* 1_000_000)
            content.int64(Int64(payload.count))
            content.name(bundle)
            if let device {
                content.byte(1)
                content.name(device)
            } else {
                content.byte(0)
            }
            if fraction != 0 { content.uint16(fraction) }
            precondition(content.count == size, "a sample's content is \(size) bytes")
            return XXHash64.hash(UnsafeRawBufferPointer(start: buffer.baseAddress, count: size))
        }
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

    private mutating func append(string: String) {
        let utf8 = string.utf8
        withUnsafeBytes(of: UInt16(truncatingIfNeeded: utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: utf8)
    }
}

/// Writes a sample's content bytes (little-endian) at a pointer whose memory
/// the caller sized: `SampleDigest.hash(_: SamplePayload)`'s buffer.
private struct ContentWriter {
    private let base: UnsafeMutableRawPointer
    private(set) var count = 0

    init(_ base: UnsafeMutableRawPointer) { self.base = base }

    mutating func byte(_ value: UInt8) {
        base.storeBytes(of: value, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    mutating func uint16(_ value: UInt16) {
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: UInt16.self)
        count += 2
    }

    mutating func int64(_ value: Int64) {
        base.storeBytes(of: value.littleEndian, toByteOffset: count, as: Int64.self)
        count += 8
    }

    /// `nameLen:u16 name`.
    mutating func name(_ utf8: UnsafeRawBufferPointer) {
        uint16(UInt16(truncatingIfNeeded: utf8.count))
        if let source = utf8.baseAddress { (base + count).copyMemory(from: source, byteCount: utf8.count) }
        count += utf8.count
    }

    private static let hexDigits: StaticString = "0123456789ABCDEF"

    /// `uuidString`'s 36 bytes (uppercase, dashes after bytes 4, 6, 8 and 10).
    mutating func uuidText(_ id: UUIDBytes) {
        let digits = Self.hexDigits.utf8Start
        for i in 0..<16 {
            if i == 4 || i == 6 || i == 8 || i == 10 { byte(0x2D) }
            let value = UInt8(truncatingIfNeeded: i < 8 ? id.high >> (56 - 8 * i) : id.low >> (56 - 8 * (i - 8)))
            byte(digits[Int(value >> 4)])
            byte(digits[Int(value & 0x0F)])
        }
    }
}
