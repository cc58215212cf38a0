/// The `<MetadataEntry key=… value=…/>` children of the step record being
/// read, entity-decoded and copied (the scanner's buffer may be gone before
/// the record's end tag), all in one reused byte buffer.
struct ExportRecordMetadata {
    struct Entry {
        /// Ranges into `bytes`; nil when the attribute is absent.
        var key: Range<Int>?
        var value: Range<Int>?
    }

    private(set) var bytes: [UInt8] = []
    private(set) var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        entries.removeAll(keepingCapacity: true)
    }

    mutating func append(key: UnsafeBufferPointer<UInt8>?, value: UnsafeBufferPointer<UInt8>?) {
        let keyRange = key.map { appendDecoded($0) }
        let valueRange = value.map { appendDecoded($0) }
        entries.append(Entry(key: keyRange, value: valueRange))
    }

    /// Appends an entry whose key and value are already decoded text.
    mutating func appendDecoded(key: [UInt8]?, value: [UInt8]?) {
        func copy(_ field: [UInt8]) -> Range<Int> {
            let start = bytes.count
            bytes.append(contentsOf: field)
            return start..<bytes.count
        }
        entries.append(Entry(key: key.map(copy), value: value.map(copy)))
    }

    /// The entries ordered by key, then value, as unsigned bytes (an absent
    /// attribute before any present one): the identity does not depend on the
    /// order the export printed them in.
    func sortedEntries() -> [Entry] {
        entries.sorted { a, b in
            let byKey = compare(a.key, b.key)
            return byKey != 0 ? byKey < 0 : compare(a.value, b.value) < 0
        }
    }

    /// The value of the first entry whose key is `key`.
    func value(forKey key: StaticString) -> Range<Int>? {
        let wanted = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
        for entry in entries {
            guard let range = entry.key, range.count == wanted.count else { continue }
            if bytes[range].elementsEqual(wanted) { return entry.value }
        }
        return nil
    }

    private mutating func appendDecoded(_ field: UnsafeBufferPointer<UInt8>) -> Range<Int> {
        let start = bytes.count
        guard let base = field.baseAddress, ExportByteSearch.find(UInt8(ascii: "&"), in: base, from: 0, to: field.count) != nil else {
            bytes.append(contentsOf: field)
            return start..<bytes.count
        }
        // Decoding never lengthens a value: room for the raw bytes is enough.
        bytes.append(contentsOf: repeatElement(0, count: field.count))
        let length = bytes.withUnsafeMutableBufferPointer {
            ExportEntityDecoder.decode(base, count: field.count, into: $0.baseAddress! + start)
        }
        bytes.removeLast(field.count - length)
        return start..<bytes.count
    }

    private func compare(_ a: Range<Int>?, _ b: Range<Int>?) -> Int {
        switch (a, b) {
        case (nil, nil): return 0
        case (nil, _): return -1
        case (_, nil): return 1
        case let (a?, b?):
            for (x, y) in zip(bytes[a], bytes[b]) where x != y { return x < y ? -1 : 1 }
            return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
        }
    }
}
