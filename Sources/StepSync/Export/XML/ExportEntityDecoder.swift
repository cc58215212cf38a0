/// Decodes the XML references an export's attribute values may hold —
/// `&lt; &gt; &amp; &quot; &apos;` and numeric `&#NN;` / `&#xNN;` — and keeps
/// every other byte exactly as written: U+00A0, curly apostrophes, stray
/// control characters, any UTF-8. (XML's attribute-value normalization of
/// tabs and newlines to spaces is deliberately not applied: the values are
/// identities and must stay byte-exact.) A reference that is not one of these,
/// or a numeric one that is not a valid scalar value, is kept as written.
enum ExportEntityDecoder {
    /// Writes the decoded form of the `count` bytes at `base` to `output`
    /// (which has room for `count` bytes: decoding never lengthens a value,
    /// the longest expansion being `&#x10FFFF;`, 10 bytes, to 4) and returns
    /// the decoded length.
    static func decode(_ base: UnsafePointer<UInt8>, count: Int, into output: UnsafeMutablePointer<UInt8>) -> Int {
        var written = 0
        var i = 0
        while i < count {
            guard let amp = ExportByteSearch.find(UInt8(ascii: "&"), in: base, from: i, to: count) else {
                (output + written).update(from: base + i, count: count - i)
                return written + count - i
            }
            (output + written).update(from: base + i, count: amp - i)
            written += amp - i
            // A reference is at most "&#x10FFFF;" (10 bytes) long.
            let limit = min(count, amp + 12)
            if let semicolon = ExportByteSearch.find(UInt8(ascii: ";"), in: base, from: amp + 1, to: limit),
               let length = decodeReference(base + amp + 1, count: semicolon - amp - 1, into: output + written) {
                written += length
                i = semicolon + 1
            } else {
                output[written] = UInt8(ascii: "&")
                written += 1
                i = amp + 1
            }
        }
        return written
    }

    static func decode(_ text: String) -> String {
        var text = text
        let bytes = text.withUTF8 { utf8 -> [UInt8] in
            guard let base = utf8.baseAddress else { return [] }
            return [UInt8](unsafeUninitializedCapacity: utf8.count) { buffer, initialized in
                initialized = decode(base, count: utf8.count, into: buffer.baseAddress!)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `name` is what stands between `&` and `;`.
    /// Writes the referenced character and returns its length, or nil when
    /// `name` (what stands between `&` and `;`) is not a reference we decode.
    private static func decodeReference(_ name: UnsafePointer<UInt8>, count: Int, into output: UnsafeMutablePointer<UInt8>) -> Int? {
        var named: UInt8?
        switch count {
        case 2 where name[1] == UInt8(ascii: "t") && name[0] == UInt8(ascii: "l"): named = UInt8(ascii: "<")
        case 2 where name[1] == UInt8(ascii: "t") && name[0] == UInt8(ascii: "g"): named = UInt8(ascii: ">")
        case 3 where ExportByteSearch.equals(name, 0, 3, "amp"): named = UInt8(ascii: "&")
        case 4 where ExportByteSearch.equals(name, 0, 4, "quot"): named = UInt8(ascii: "\"")
        case 4 where ExportByteSearch.equals(name, 0, 4, "apos"): named = UInt8(ascii: "'")
        default: break
        }
        if let byte = named {
            output[0] = byte
            return 1
        }
        guard count >= 2, name[0] == UInt8(ascii: "#") else { return nil }
        var value: UInt32 = 0
        if name[1] == UInt8(ascii: "x") || name[1] == UInt8(ascii: "X") {
            guard count >= 3, count <= 8 else { return nil }
            for i in 2..<count {
                let c = name[i]
                let digit: UInt8
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
            }
        } else {
            guard count <= 8 else { return nil }
            for i in 1..<count {
                let digit = name[i] &- UInt8(ascii: "0")
                guard digit <= 9 else { return nil }
                value = value * 10 + UInt32(digit)
            }
        }
        // NUL and surrogates are not characters XML can reference.
        guard value != 0, let scalar = Unicode.Scalar(value), let encoded = UTF8.encode(scalar) else { return nil }
        var length = 0
        for byte in encoded {
            output[length] = byte
            length += 1
        }
        return length
    }
}
