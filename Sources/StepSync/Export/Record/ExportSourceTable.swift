/// The distinct (sourceName, device name) pairs of an export's step records,
/// interned: an export has millions of records but a handful of sources, so
/// each record keeps a 4-byte index and each string exists once.
///
/// It also learns which sources are the person's own Apple devices (a record
/// the device wrote itself marks its source, `markAppleDevice`); once the
/// whole export is read, `resolveAppleDevices` gives every sample of such a
/// `sourceName` Apple's per-device bundle id (docs/EXPORT.md, "Apple's devices").
struct ExportSourceTable: Sendable {
    /// The bundle id HealthKit gives an Apple device's own samples starts so
    /// (docs/TOTALS.md §1); an export's get it followed by the device's name.
    static let appleDevicePrefix = "com.apple.health."

    struct Source: Sendable, Equatable {
        /// The record's `sourceName` (`source` in iOS 8), byte-exact after entity decoding.
        var sourceName: String
        /// What its samples carry: the `sourceName`, or for an Apple
        /// device's own samples `com.apple.health.` followed by it.
        var sourceBundleId: String
        /// The `name:` field of the record's `device`, or nil.
        var sourceDeviceName: String?
    }

    private(set) var sources: [Source] = []
    /// Per source: a record of it was written by an Apple device itself.
    private var appleDevice: [Bool] = []
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
            let name = String(decoding: sourceName, as: UTF8.self)
            let source = Source(sourceName: name, sourceBundleId: name,
                                sourceDeviceName: deviceName.map { String(decoding: $0, as: UTF8.self) })
            sources.append(source)
            appleDevice.append(false)
            violations.append(SampleContract.checkSource(sourceBundleId: source.sourceBundleId,
                                                         sourceDeviceName: source.sourceDeviceName))
            indexByKey[key] = index
        }
        swap(&lastKey, &key)   // keeps both buffers uniquely owned: no copy, no allocation
        lastIndex = index
        return index
    }

    func isAppleDevice(_ index: UInt32) -> Bool { appleDevice[Int(index)] }

    mutating func markAppleDevice(_ index: UInt32) { appleDevice[Int(index)] = true }

    /// Once every record is read: every source whose `sourceName` has a
    /// marked source gets `com.apple.health.` + that name as its bundle id
    /// (unless that passes the contract's length), and one without a device
    /// name — an iOS 8-era record, from before HealthKit printed devices —
    /// takes the marked ones' device name when they all have the same.
    mutating func resolveAppleDevices() {
        var deviceNames: [[UInt8]: Set<[UInt8]?>] = [:]
        for (i, source) in sources.enumerated() where appleDevice[i] {
            deviceNames[Array(source.sourceName.utf8), default: []].insert(source.sourceDeviceName.map { Array($0.utf8) })
        }
        guard !deviceNames.isEmpty else { return }
        for i in sources.indices {
            guard let names = deviceNames[Array(sources[i].sourceName.utf8)] else { continue }
            let bundleId = Self.appleDevicePrefix + sources[i].sourceName
            guard bundleId.utf8.count <= SampleContract.maxSourceBundleIdBytes else { continue }
            sources[i].sourceBundleId = bundleId
            if sources[i].sourceDeviceName == nil, names.count == 1, let only = names.first, let only {
                sources[i].sourceDeviceName = String(decoding: only, as: UTF8.self)
            }
        }
    }
}
