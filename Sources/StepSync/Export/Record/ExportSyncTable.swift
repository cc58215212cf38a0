import StepLog

/// The sync metadata of an export's step records, collected while reading
/// (few records carry any), and the rule that applies it: among records
/// with the same (sourceName, sync identifier) and an integer version, only
/// those with the highest version are current samples; the others were
/// replaced. A record skipped for breaking the sample contract still counts
/// here: its higher version replaces the older ones even though it is not
/// stored itself.
struct ExportSyncTable {
    struct Entry {
        /// Nil for a record that is not stored (outside the sample contract).
        var id: UUIDBytes?
        var startMilliseconds: Int64
        var key: UInt32
        var version: Int64?
    }

    private(set) var entries: [Entry] = []
    /// (sourceName, identifier) per key.
    private(set) var keys: [(sourceName: String, identifier: String)] = []
    private var keyIndex: [[UInt8]: UInt32] = [:]

    mutating func add(id: UUIDBytes?, startMilliseconds: Int64, sourceName: UnsafeBufferPointer<UInt8>,
                      identifier: UnsafeBufferPointer<UInt8>, version: UnsafeBufferPointer<UInt8>?) {
        var keyBytes: [UInt8] = []
        withUnsafeBytes(of: UInt32(sourceName.count).littleEndian) { keyBytes.append(contentsOf: $0) }
        keyBytes.append(contentsOf: sourceName)
        keyBytes.append(contentsOf: identifier)
        let key: UInt32
        if let known = keyIndex[keyBytes] {
            key = known
        } else {
            key = UInt32(keys.count)
            keys.append((String(decoding: sourceName, as: UTF8.self), String(decoding: identifier, as: UTF8.self)))
            keyIndex[keyBytes] = key
        }
        entries.append(Entry(id: id, startMilliseconds: startMilliseconds, key: key, version: version.flatMap(Self.integer)))
    }

    /// Splits the stored entries into current and replaced ones.
    func resolve() -> (current: [ExportSyncedRecord], replaced: [ExportSyncedRecord]) {
        var highest = [Int64?](repeating: nil, count: keys.count)
        for entry in entries {
            guard let version = entry.version else { continue }
            if let known = highest[Int(entry.key)], known >= version { continue }
            highest[Int(entry.key)] = version
        }
        var current: [ExportSyncedRecord] = [], replaced: [ExportSyncedRecord] = []
        var seen = Set<UUIDBytes>()
        for entry in entries {
            guard let id = entry.id, seen.insert(id).inserted else { continue }   // unstored, or a collapsed duplicate
            let key = keys[Int(entry.key)]
            let record = ExportSyncedRecord(id: id.uuid, startMilliseconds: entry.startMilliseconds, sourceName: key.sourceName,
                                            syncIdentifier: key.identifier, syncVersion: entry.version)
            if let version = entry.version, let top = highest[Int(entry.key)], version < top {
                replaced.append(record)
            } else {
                current.append(record)
            }
        }
        return (current, replaced)
    }

    /// A version as HealthKit prints an integer NSNumber: optional '-', 1–18 digits.
    static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        let negative = text.first == UInt8(ascii: "-")
        if negative { i = 1 }
        guard text.count > i, text.count - i <= 18 else { return nil }
        var value: Int64 = 0
        while i < text.count {
            let digit = text[i] &- UInt8(ascii: "0")
            guard digit <= 9 else { return nil }
            value = value * 10 + Int64(digit)
            i += 1
        }
        return negative ? -value : value
    }
}
