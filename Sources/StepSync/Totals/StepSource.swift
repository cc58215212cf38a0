import StepLog

/// Where a sample came from: its `(sourceBundleId, sourceDeviceName)` pair,
/// compared as UTF-8 bytes (a null device name differs from an empty one).
/// Swift's `String ==` treats canonically equivalent strings as equal; the
/// server's Python does not, so identity, hashing and order here go by bytes
/// (docs/TOTALS.md §1).
public struct StepSource: Hashable, Sendable {
    public let bundleId: String
    public let deviceName: String?

    public init(bundleId: String, deviceName: String?) {
        self.bundleId = bundleId
        self.deviceName = deviceName
    }

    public init(of sample: StepSample) {
        self.init(bundleId: sample.sourceBundleId, deviceName: sample.sourceDeviceName)
    }

    /// What priority patterns are matched against (docs/TOTALS.md §1). An
    /// Apple device's own source (bundle id `com.apple.health.…`: HealthKit's
    /// per-device sources, and an export's records the device wrote itself)
    /// is named by what it is, its device name (`Apple Watch`, `iPhone`), and
    /// by the rest of its bundle id (an export's: the name the person gave the
    /// device, for a `--priority` that names it). Any other source is named by
    /// its bundle id (an export's `sourceName`, an app's bundle id): a
    /// third-party app on the iPhone is named by the app, not by the phone.
    public var names: [String] {
        guard bundleId.utf8.starts(with: Self.appleDevicePrefix) else { return [bundleId] }
        let rest = String(decoding: bundleId.utf8.dropFirst(Self.appleDevicePrefix.count), as: UTF8.self)
        return deviceName.map { [$0, rest] } ?? [rest]
    }

    /// For people: the bundle id, with the device name in parentheses when there is one.
    public var label: String {
        guard let deviceName, !deviceName.isEmpty else { return bundleId }
        return "\(bundleId) (\(deviceName))"
    }

    static let appleDevicePrefix = Array("com.apple.health.".utf8)

    public static func == (a: StepSource, b: StepSource) -> Bool {
        guard a.bundleId.utf8.elementsEqual(b.bundleId.utf8) else { return false }
        switch (a.deviceName, b.deviceName) {
        case (nil, nil): return true
        case (let x?, let y?): return x.utf8.elementsEqual(y.utf8)
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        for byte in bundleId.utf8 { hasher.combine(byte) }
        hasher.combine(0xFF as UInt16) // not a UTF-8 byte: separates the fields
        if let deviceName { for byte in deviceName.utf8 { hasher.combine(byte) } } else { hasher.combine(0x1FF as UInt16) }
    }

    /// The tie-break among sources of equal rank: bundle id bytes, then the
    /// device name (null first, then bytes).
    static func precedesByName(_ a: StepSource, _ b: StepSource) -> Bool {
        if !a.bundleId.utf8.elementsEqual(b.bundleId.utf8) {
            return a.bundleId.utf8.lexicographicallyPrecedes(b.bundleId.utf8)
        }
        switch (a.deviceName, b.deviceName) {
        case (nil, nil), (_?, nil): return false
        case (nil, _?): return true
        case (let x?, let y?): return x.utf8.lexicographicallyPrecedes(y.utf8)
        }
    }
}
