/// Finds the main export XML inside an export.zip by content, not by name:
/// Apple localizes the name (`export.xml`, `eksport.xml`, `exportar.xml`, …)
/// and the zip holds other XML beside it.
///
/// Candidates are the `.xml` entries except `export_cda.xml` (the clinical
/// document, also XML) and anything under `workout-routes/` or
/// `electrocardiograms/`. Each candidate is inflated only as far as its root
/// element — past the declaration and the DTD, a few KiB — and the first
/// whose root is `<HealthData` wins. Larger candidates are looked at first:
/// the export is by far the largest file in the zip.
enum ExportZipEntryFinder {
    /// How much of a candidate is inflated to find its root element at most
    /// (the longest DTD Apple has shipped is ~20 KiB).
    static let sniffLimit = 4 << 20

    struct Choice {
        var entry: ZipEntry
        var xmlEntriesLookedAt: Int
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
        for entry in candidates {
            lookedAt += 1
            do {
                if try rootElement(of: entry, in: file) == "HealthData" {
                    return Choice(entry: entry, xmlEntriesLookedAt: lookedAt)
                }
            } catch {
                // A damaged side file should not hide a healthy export; but if
                // no export is found, the damage is the better explanation.
                if firstError == nil { firstError = error }
            }
        }
        if let firstError { throw firstError }
        throw ExportError.noHealthExportInZip(path: file.path, xmlEntriesLookedAt: lookedAt)
    }

    /// The name of the entry's root element, or nil when it has none within
    /// `sniffLimit` bytes (or is not XML).
    static func rootElement(of entry: ZipEntry, in file: ExportInputFile) throws -> String? {
        let reader = try ZipEntryReader(file: file, entry: entry)
        var buffer = [UInt8](repeating: 0, count: min(sniffLimit, Int(max(entry.uncompressedSize, 1))))
        var filled = 0
        while true {
            let piece = min(64 << 10, buffer.count - filled)
            let n = try buffer.withUnsafeMutableBufferPointer { try reader.read(into: $0.baseAddress! + filled, capacity: piece) }
            filled += n
            let atEnd = n == 0 || filled == buffer.count
            let outcome = buffer.withUnsafeBufferPointer {
                HealthXMLProlog.findRoot($0.baseAddress!, count: filled, atEnd: atEnd)
            }
            switch outcome {
            case .root(_, let name): return name
            case .needMore: continue
            default: return nil
            }
        }
    }
}
