/// Finds the root element of an export's XML: skips an optional UTF-8 BOM,
/// whitespace, the XML declaration and other processing instructions,
/// comments, and the DOCTYPE with its inline DTD.
///
/// The DTD is never parsed, only stepped over: iOS 16 ("HealthKit Export
/// Version: 12") wrote one whose ATTLIST blocks for VisionPrescription,
/// RightEye and LeftEye are never closed, which makes strict parsers fail. The
/// internal subset is taken to end at the first `]` followed by optional
/// whitespace and `>`, which holds for every export version seen (the DTD has
/// no `]` of its own).
enum HealthXMLProlog {
    enum Outcome: Equatable {
        /// The root element's `<` is at `offset`; its name is `name`.
        case root(offset: Int, name: String)
        /// More bytes are needed to decide (never returned when `atEnd`).
        case needMore
        /// Something other than prolog items and whitespace at `offset`.
        case unexpected(offset: Int, what: String)
        /// The input ended inside `what` ("comment", "DOCTYPE declaration", …), which starts at `offset`.
        case unterminated(offset: Int, what: String)
        /// The input holds no element at all.
        case noElement
    }

    static func findRoot(_ base: UnsafePointer<UInt8>, count: Int, atEnd: Bool) -> Outcome {
        var i = 0
        if ExportByteSearch.hasPrefix(base, 0, count, "\u{FEFF}") { i = 3 }
        // A buffer that ends inside a byte-order mark: wait for the rest.
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        if count < 3, !atEnd, (0..<count).allSatisfy({ base[$0] == bom[$0] }) { return .needMore }
        func incomplete(_ what: String, _ start: Int) -> Outcome {
            atEnd ? .unterminated(offset: start, what: what) : .needMore
        }
        while true {
            while i < count, base[i] == 0x20 || base[i] == 0x09 || base[i] == 0x0A || base[i] == 0x0D { i += 1 }
            guard i < count else { return atEnd ? .noElement : .needMore }
            guard base[i] == UInt8(ascii: "<") else {
                return .unexpected(offset: i, what: "text before the root element")
            }
            let start = i
            guard i + 1 < count else { return incomplete("tag", start) }
            switch base[i + 1] {
            case UInt8(ascii: "?"):
                guard let close = ExportByteSearch.find("?>", in: base, from: i + 2, to: count) else {
                    return incomplete("processing instruction", start)
                }
                i = close + 2
            case UInt8(ascii: "!"):
                if ExportByteSearch.hasPrefix(base, i, count, "<!--") {
                    guard let close = ExportByteSearch.find("-->", in: base, from: i + 4, to: count) else {
                        return incomplete("comment", start)
                    }
                    i = close + 3
                } else if ExportByteSearch.hasPrefix(base, i, count, "<!DOCTYPE") {
                    guard let end = doctypeEnd(base, from: i + 9, count: count) else {
                        return incomplete("DOCTYPE declaration", start)
                    }
                    i = end
                } else if count - i < 9, !atEnd {
                    return .needMore
                } else {
                    return .unexpected(offset: i, what: "a markup declaration outside the DOCTYPE")
                }
            default:
                var j = i + 1
                while j < count, !ExportByteSearch.isSpace(base[j]), base[j] != UInt8(ascii: ">"), base[j] != UInt8(ascii: "/") {
                    j += 1
                }
                guard j < count else { return incomplete("tag", start) }
                guard j > i + 1 else { return .unexpected(offset: i, what: "a '<' that starts no element") }
                return .root(offset: i, name: String(decoding: UnsafeBufferPointer(start: base + i + 1, count: j - i - 1), as: UTF8.self))
            }
        }
    }

    /// Offset just past the DOCTYPE's closing `>`; `from` is just after
    /// `<!DOCTYPE`. Nil when the buffer ends first.
    static func doctypeEnd(_ base: UnsafePointer<UInt8>, from: Int, count: Int) -> Int? {
        var i = from
        // Before the internal subset: the name and an optional external id.
        while i < count, base[i] != UInt8(ascii: "["), base[i] != UInt8(ascii: ">") { i += 1 }
        guard i < count else { return nil }
        if base[i] == UInt8(ascii: ">") { return i + 1 }
        // The internal subset: the first "]" followed by optional whitespace and ">".
        var search = i + 1
        while let bracket = ExportByteSearch.find(UInt8(ascii: "]"), in: base, from: search, to: count) {
            var j = bracket + 1
            while j < count, base[j] == 0x20 || base[j] == 0x09 || base[j] == 0x0A || base[j] == 0x0D { j += 1 }
            guard j < count else { return nil }
            if base[j] == UInt8(ascii: ">") { return j + 1 }
            search = bracket + 1
        }
        return nil
    }
}
