/// The distinct (sourceName, device name) pairs of an export's step records,
/// interned: an export has millions of records but a handful of sources, so
/// each record keeps a 4-byte index and each string exists once.
struct ExportSourceTable: Sendable {
    struct Source: Sendable, Equatable {
        /// The record's `sourceName`, byte-exact after entity decoding.
        var sourceBundleId: String
        /// The `name:` field of the record's `device`, or nil.
        var sourceDeviceName: String?
    }

    private(set) var sources: [Source] = []
    /// Per source, the sample contract's verdict on its two names (checked
    /// once, on the strings the samples will carry).
    private var violations: [SampleContract.Violation?] = []
    private var indexByKey: [[UInt8]: UInt32] = [:]
    /// Consecutive records usually share a source: the last key is checked
    /// before the dictionary, which saves hashing and a key allocation.
    private var lastKey: [UInt8] = []
    private var lastIndex: UInt32 = .max
    private var key: [UInt8] = []

    func violation(at index: UInt32) -> SampleContract.Violation? { violations[Int(index)] }

    mutating func intern(sourceName: UnsafeBufferPointer<UInt8>, deviceName: UnsafeBufferPointer<UInt8>?) -> UInt32 {
        key.removeAll(keepingCapacity: true)
        withUnsafeBytes(of: UInt32(sourceName.count).littleEndian) { key.append(contentsOf: $0) }
        key.append(contentsOf: sourceName)
        if let deviceName {
            key.append(1)
            key.append(contentsOf: deviceName)
        }
        if lastIndex != .max, key == lastKey { return lastIndex }
        let index: UInt32
        if let known = indexByKey[key] {
            index = known
        } else {
            index = UInt32(sources.count)
            let source = Source(sourceBundleId: String(decoding: sourceName, as: UTF8.self),
                                sourceDeviceName: deviceName.map { String(decoding: $0, as: UTF8.self) })
            sources.append(source)
            violations.append(SampleContract.checkSource(sourceBundleId: source.sourceBundleId,
                                                         sourceDeviceName: source.sourceDeviceName))
            indexByKey[key] = index
        }
        swap(&lastKey, &key)   // keeps both buffers uniquely owned: no copy, no allocation
        lastIndex = index
        return index
    }
}
