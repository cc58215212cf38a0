/// Finds the main export XML inside an export.zip by content, not by name:
/// Apple localizes the name (`export.xml`, `eksport.xml`, `exportar.xml`, …)
/// and the zip holds other XML beside it.
///
/// Candidates are the `.xml` entries except `export_cda.xml` (the clinical
/// document, also XML) and anything under `workout-routes/` or
/// `electrocardiograms/`. Each candidate is inflated only as far as its root
/// element — past the declaration and the DTD, a few KiB — and those whose
/// root is `<HealthData` are exports. One is read; when a zip holds several
/// (two exports zipped together), `chooseNewest` picks one and names the others.
enum ExportZipEntryFinder {
    /// How much of a candidate is inflated to find its root element at most
    /// (the longest DTD Apple has shipped is ~20 KiB).
    static let sniffLimit = 4 << 20

    struct Choice {
        var entry: ZipEntry
        var xmlEntriesLookedAt: Int
        /// The zip's other exports, not read (see `chooseNewest`).
        var otherExports: [ExportZipOtherExport] = []
        /// The chosen export's `ExportDate`, when there were several to choose from.
        var exportDateMilliseconds: Int64?
    }

    static func isCandidate(_ entry: ZipEntry) -> Bool {
        let lower = entry.name.lowercased()
        guard !entry.isDirectory, lower.hasSuffix(".xml") else { return false }
        let components = lower.split(separator: "/")
        if components.last == "export_cda.xml" { return false }
        return !components.dropLast().contains { $0 == "workout-routes" || $0 == "electrocardiograms" }
    }

    static func find(in file: ExportInputFile, entries: [ZipEntry]) throws -> Choice {
        let candidates = entries.filter(isCandidate).sorted { $0.uncompressedSize > $1.uncompressedSize }
        var lookedAt = 0
        var firstError: Error?
        var exports: [ZipEntry] = []
        for entry in candidates {
            lookedAt += 1
            do {
                if try rootElement(of: entry, in: file) == "HealthData" { exports.append(entry) }
            } catch {
                // A damaged side file should not hide a healthy export; but if
                // no export is found, the damage is the better explanation.
                if firstError == nil { firstError = error }
            }
        }
        if !exports.isEmpty { return chooseNewest(among: exports, in: file, xmlEntriesLookedAt: lookedAt) }
        if let firstError { throw firstError }
        throw ExportError.noHealthExportInZip(path: file.path, xmlEntriesLookedAt: lookedAt)
    }

    /// The name of the entry's root element, or nil when it has none within
    /// `sniffLimit` bytes (or is not XML).
    static func rootElement(of entry: ZipEntry, in file: ExportInputFile) throws -> String? {
        try inflatingStart(of: entry, in: file) { base, count, atEnd in
            switch HealthXMLProlog.findRoot(base, count: count, atEnd: atEnd) {
            case .root(_, let name): return .some(name)
            case .needMore: return nil
            default: return .some(nil)
            }
        }
    }

    /// Inflates the start of `entry`, 64 KiB at a time and at most
    /// `sniffLimit` bytes, until `look` (given the bytes so far and whether
    /// there are no more) answers: `.some(answer)`, or nil for "more bytes".
    static func inflatingStart<T>(of entry: ZipEntry, in file: ExportInputFile,
                                  _ look: (UnsafePointer<UInt8>, Int, Bool) -> T??) throws -> T? {
        let reader = try ZipEntryReader(file: file, entry: entry)
        var buffer = [UInt8](repeating: 0, count: min(sniffLimit, Int(max(entry.uncompressedSize, 1))))
        var filled = 0
        while true {
            let piece = min(64 << 10, buffer.count - filled)
            let n = try buffer.withUnsafeMutableBufferPointer { try reader.read(into: $0.baseAddress! + filled, capacity: piece) }
            filled += n
            let atEnd = n == 0 || filled == buffer.count
            if let answer = buffer.withUnsafeBufferPointer({ look($0.baseAddress!, filled, atEnd) }) { return answer }
            if atEnd { return nil }
        }
    }
}
