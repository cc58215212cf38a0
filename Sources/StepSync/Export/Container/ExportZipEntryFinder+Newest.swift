/// A zip with more than one export (`<HealthData>` root) in it: the newest
/// is read, the others named.
extension ExportZipEntryFinder {
    /// One export: it. Several: the one with the newest `ExportDate` (an
    /// export holds everything Health held when it was written, so the newest
    /// is the most complete); one whose date cannot be read ranks below any
    /// dated one; equal dates go to the larger entry, then the first name.
    static func chooseNewest(among exports: [ZipEntry], in file: ExportInputFile, xmlEntriesLookedAt: Int) -> Choice {
        guard exports.count > 1 else { return Choice(entry: exports[0], xmlEntriesLookedAt: xmlEntriesLookedAt) }
        // A damaged entry has no date to read: it ranks last, and is named.
        let dated = exports.map { (entry: $0, date: (try? exportDate(of: $0, in: file)) ?? nil) }
        let ordered = dated.sorted { a, b in
            switch (a.date, b.date) {
            case let (x?, y?) where x != y: return x > y
            case (_?, nil): return true
            case (nil, _?): return false
            default:
                if a.entry.uncompressedSize != b.entry.uncompressedSize { return a.entry.uncompressedSize > b.entry.uncompressedSize }
                return a.entry.name.utf8.lexicographicallyPrecedes(b.entry.name.utf8)
            }
        }
        let others = ordered.dropFirst().map {
            ExportZipOtherExport(entry: $0.entry.name, exportDateMilliseconds: $0.date, bytes: $0.entry.uncompressedSize)
        }
        return Choice(entry: ordered[0].entry, xmlEntriesLookedAt: xmlEntriesLookedAt, otherExports: others,
                      exportDateMilliseconds: ordered[0].date)
    }

    /// The `value` of the export's `<ExportDate>` (the root's first child),
    /// inflating only the start of the entry; nil when the first child is not
    /// an `ExportDate` with a date this reader knows.
    static func exportDate(of entry: ZipEntry, in file: ExportInputFile) throws -> Int64? {
        try inflatingStart(of: entry, in: file, firstChildDate) ?? nil
    }

    /// In `base[0..<count]`: `.some(date)` once the root's first child is
    /// known (`.some(nil)`: not an `ExportDate`, or no date in it), nil when
    /// more bytes are needed.
    private static func firstChildDate(_ base: UnsafePointer<UInt8>, count: Int, atEnd: Bool) -> Int64?? {
        let undecided: Int64?? = atEnd ? .some(nil) : nil
        guard case let .root(rootOffset, _) = HealthXMLProlog.findRoot(base, count: count, atEnd: atEnd) else { return undecided }
        // Past the root's start tag: its first '>' outside a quoted value.
        var i = rootOffset
        while i < count, base[i] != UInt8(ascii: ">") {
            if base[i] == UInt8(ascii: "\"") || base[i] == UInt8(ascii: "'") {
                guard let close = ExportByteSearch.find(base[i], in: base, from: i + 1, to: count) else { return undecided }
                i = close
            }
            i += 1
        }
        i += 1
        while true {
            while i < count, ExportByteSearch.isSpace(base[i]) { i += 1 }
            guard i < count else { return undecided }
            if ExportByteSearch.hasPrefix(base, i, count, "<!--") {
                guard let close = ExportByteSearch.find("-->", in: base, from: i + 4, to: count) else { return undecided }
                i = close + 3
                continue
            }
            guard ExportByteSearch.hasPrefix(base, i, count, "<ExportDate") else {
                return count - i < 11 ? undecided : .some(nil)
            }
            guard let end = ExportByteSearch.find(UInt8(ascii: ">"), in: base, from: i, to: count) else { return undecided }
            guard let value = ExportByteSearch.find("value=", in: base, from: i, to: end), value + 6 < end,
                  let close = ExportByteSearch.find(base[value + 6], in: base, from: value + 7, to: end)
            else { return .some(nil) }
            return .some(ExportDateParser.milliseconds(base + value + 7, count: close - value - 7))
        }
    }
}
