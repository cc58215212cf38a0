import StepLog

/// A sample's content hash, as the server computes it (`stepserver/digests.py`;
/// docs/RECONCILE.md): XXH64, seed 0, of
///
///     idLen:u8 id start:i64 end:i64 count:i64 bundleLen:u16 bundle (00 | 01 deviceLen:u16 device)
///
/// little-endian, the id as the upload spells it (`uuidString`), instants in
/// nanoseconds since 1970 UTC, names as their UTF-8 bytes. Two versions of a
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
        return XXHash64.hash(bytes)
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

    private mutating func append(string: String) {
        let utf8 = string.utf8
        withUnsafeBytes(of: UInt16(truncatingIfNeeded: utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: utf8)
    }
}
