/// Tells a damaged zip from a malformed export. A byte changed in an entry's
/// deflate data inflates to garbage at once, and the garbage reads as
/// malformed XML long before the end of the entry, where its size and CRC-32
/// are checked; so when the XML read from an entry is malformed (or no
/// candidate holds an export's root element), the entry is read again whole,
/// only inflated and checked, and its damage, when it has any, is the error.
enum ZipEntryIntegrity {
    static let bufferCapacity = 1 << 20

    /// Why `entry` is damaged (a deflate data error, a size or CRC-32
    /// mismatch, cut-off data), or nil when it is intact.
    static func damage(of entry: ZipEntry, in file: ExportInputFile) -> ExportError? {
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: bufferCapacity)
        defer { buffer.deallocate() }
        do {
            let reader = try ZipEntryReader(file: file, entry: entry)
            while try reader.read(into: buffer, capacity: bufferCapacity) > 0 {}
            return nil
        } catch let error as ExportError {
            return error
        } catch {
            return nil
        }
    }

    /// When the export at `path` is a zip, the damage of the first entry that
    /// could hold the export (the largest first) and has any; nil for a plain
    /// XML file or a zip whose candidates are intact.
    static func damageBehindTheXML(of path: String) -> ExportError? {
        guard let file = try? ExportInputFile(path: path), (try? ExportInputKind.detect(file)) == .zip,
              let entries = try? ZipCentralDirectory.entries(of: file) else { return nil }
        for entry in entries.filter(ExportZipEntryFinder.isCandidate).sorted(by: { $0.uncompressedSize > $1.uncompressedSize }) {
            if let damage = damage(of: entry, in: file) { return damage }
        }
        return nil
    }
}
