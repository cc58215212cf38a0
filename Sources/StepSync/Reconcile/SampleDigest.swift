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
/// One encoder (`content`) writes those bytes for both kinds of input, a
/// sample and a stored version, into a buffer on the stack: hashing every
/// version of a store allocates nothing.
public enum SampleDigest {
    /// The content hash of `sample`.
    public static func hash(_ sample: StepSample) -> UInt64 {
        var bundle = sample.sourceBundleId, device = sample.sourceDeviceName
        let id = UUIDBytes(sample.id), fraction = UInt16(sample.countFraction)
        return bundle.withUTF8 { bundle in
            guard var device else {
                return content(id, sample.startMilliseconds, sample.endMilliseconds, Int64(sample.count), fraction,
                               UnsafeRawBufferPointer(bundle), nil)
            }
            return device.withUTF8 { device in
                content(id, sample.startMilliseconds, sample.endMilliseconds, Int64(sample.count), fraction,
                        UnsafeRawBufferPointer(bundle), UnsafeRawBufferPointer(device))
            }
        }
    }

    /// The content hash of a stored version, read from its record's bytes
    /// (what `hash(_:)` gives for the sample it holds, without making one).
    public static func hash(_ payload: SamplePayload) -> UInt64 {
        content(payload.uuid, payload.startMilliseconds, payload.endMilliseconds, Int64(payload.count), payload.countFraction,
                payload.sourceBundleId, payload.sourceDeviceName)
    }

    /// The UTC day (days since 1970) a sample's digest is kept under: its start's.
    public static func day(_ sample: StepSample) -> Int64 {
        ISO8601.floorDivide(sample.startMilliseconds, 86_400_000).0
    }

    /// The UTC day of a stored version (`day(_:)`).
    public static func day(_ payload: SamplePayload) -> Int64 {
        ISO8601.floorDivide(payload.startMilliseconds, 86_400_000).0
    }

    /// XXH64 of the content bytes (the layout above), written on the stack.
    private static func content(_ id: UUIDBytes, _ startMilliseconds: Int64, _ endMilliseconds: Int64, _ count: Int64,
                                _ fraction: UInt16, _ bundle: UnsafeRawBufferPointer, _ device: UnsafeRawBufferPointer?) -> UInt64 {
        let size = 64 + bundle.count + (device.map { 2 + $0.count } ?? 0) + (fraction != 0 ? 2 : 0)
        return withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            var content = ContentWriter(buffer.baseAddress!)
            content.byte(36)
            content.uuidText(id)
            content.int64(startMilliseconds &* 1_000_000)
            content.int64(endMilliseconds &* 1_000_000)
            content.int64(count)
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
}

/// Writes a sample's content bytes (little-endian) at a pointer whose memory
/// the caller sized: `SampleDigest.content`'s buffer.
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
