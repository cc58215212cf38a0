/// What an export file is, decided from its first bytes (never its name: the
/// user may have renamed it, and Apple localizes names).
enum ExportInputKind: Equatable {
    /// Starts with a zip local-file-header (`PK\x03\x04`), or is an empty zip
    /// (`PK\x05\x06`, the end-of-central-directory record alone).
    case zip
    /// Starts with `<`, after an optional UTF-8 byte-order mark and whitespace.
    case xml

    /// How many leading bytes are looked at: enough for a BOM and a generous
    /// run of leading whitespace.
    static let sniffLength = 4096

    static func detect(_ file: ExportInputFile) throws -> ExportInputKind {
        let head = try file.readBytes(at: 0, count: sniffLength)
        if let kind = detect(head) { return kind }
        throw ExportError.notZipOrXML(path: file.path, found: describe(head))
    }

    static func detect(_ head: [UInt8]) -> ExportInputKind? {
        if head.count >= 4, head[0] == 0x50, head[1] == 0x4B,
           (head[2] == 3 && head[3] == 4) || (head[2] == 5 && head[3] == 6) {
            return .zip
        }
        var i = 0
        if head.count >= 3, head[0] == 0xEF, head[1] == 0xBB, head[2] == 0xBF { i = 3 }
        while i < head.count, head[i] == 0x20 || head[i] == 0x09 || head[i] == 0x0A || head[i] == 0x0D { i += 1 }
        return i < head.count && head[i] == UInt8(ascii: "<") ? .xml : nil
    }

    /// "the file is empty" or "it starts with bytes 25 50 44 46 … "%PDF"".
    static func describe(_ head: [UInt8]) -> String {
        if head.isEmpty { return "the file is empty" }
        var i = 0
        while i < head.count, head[i] == 0x20 || head[i] == 0x09 || head[i] == 0x0A || head[i] == 0x0D { i += 1 }
        if i == head.count { return "the file holds only whitespace" }
        let shown = head.prefix(8)
        let hex = shown.map { byte -> String in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: " ")
        let text = String(decoding: shown.map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
        return "it starts with bytes \(hex) \"\(text)\""
    }
}
