/// Which source counts where sources overlap: a list of patterns, highest
/// first (docs/TOTALS.md §2). `=TEXT` matches a source one of whose names
/// (`StepSource.names`) equals TEXT, `TEXT` one with a name containing it,
/// both after normalizing (U+00A0 → space, U+2019 → `'`, ASCII A–Z → a–z). A
/// source's rank is the index of the first matching pattern (the number of
/// patterns when none matches); sources of equal rank are ordered by bundle
/// id, then device name.
public struct SourcePriority: Hashable, Sendable {
    public let patterns: [String]

    /// Apple's default ("Manage Health data from multiple sources"): entered by
    /// hand, then Apple Watch above iPhone (and iPod touch), then third parties.
    public static let `default` = SourcePriority(validated: ["=Health", "=com.apple.Health", "Apple Watch", "iPhone", "iPod"])

    private let matchers: [(exact: Bool, text: [UInt8])]

    private init(validated patterns: [String]) {
        self.patterns = patterns
        matchers = patterns.map { p in
            p.hasPrefix("=") ? (true, Self.normalize(p.utf8.dropFirst())) : (false, Self.normalize(p.utf8))
        }
    }

    /// Patterns as given; an empty one (or `=` alone) is an error.
    public init(patterns: [String]) throws {
        for p in patterns where p.isEmpty || p == "=" {
            throw SourcePriorityError("a priority pattern is empty (patterns: \(patterns.map { "'\($0)'" }.joined(separator: ", ")))")
        }
        guard !patterns.isEmpty else { throw SourcePriorityError("the priority list is empty") }
        self.init(validated: patterns)
    }

    /// `--priority "Apple Watch, iPhone"`: comma-separated, spaces and tabs
    /// around each pattern removed.
    public init(list: String) throws {
        try self.init(patterns: list.split(separator: ",", omittingEmptySubsequences: false).map { Self.strip(Substring($0)) })
    }

    /// A priority file: one pattern a line, stripped like `--priority`; empty
    /// lines and lines starting with `#` are ignored.
    public init(fileText: String) throws {
        var patterns: [String] = []
        for line in fileText.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let p = Self.strip(line)
            if p.isEmpty || p.hasPrefix("#") { continue }
            patterns.append(p)
        }
        try self.init(patterns: patterns)
    }

    /// The source's rank: the index of the first pattern matching one of its names.
    public func rank(of source: StepSource) -> Int {
        let names = source.names.map { Self.normalize($0.utf8) }
        for (i, m) in matchers.enumerated() {
            for name in names where m.exact ? name == m.text : Self.contains(name, m.text) { return i }
        }
        return patterns.count
    }

    /// `sources` in priority order, highest first.
    public func ordered<S: Sequence>(_ sources: S) -> [StepSource] where S.Element == StepSource {
        sources.map { (rank(of: $0), $0) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : StepSource.precedesByName($0.1, $1.1) }
            .map(\.1)
    }

    public static func == (a: SourcePriority, b: SourcePriority) -> Bool { a.patterns == b.patterns }
    public func hash(into hasher: inout Hasher) { hasher.combine(patterns) }

    /// U+00A0 → U+0020, U+2019 → U+0027, ASCII A–Z → a–z, on UTF-8 bytes.
    static func normalize<C: Collection>(_ utf8: C) -> [UInt8] where C.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var i = utf8.startIndex
        while i != utf8.endIndex {
            let b = utf8[i]
            let next = utf8.index(after: i)
            if b == 0xC2, next != utf8.endIndex, utf8[next] == 0xA0 {
                out.append(0x20)
                i = utf8.index(after: next)
                continue
            }
            if b == 0xE2, next != utf8.endIndex, utf8[next] == 0x80 {
                let third = utf8.index(after: next)
                if third != utf8.endIndex, utf8[third] == 0x99 {
                    out.append(0x27)
                    i = utf8.index(after: third)
                    continue
                }
            }
            out.append(b >= 0x41 && b <= 0x5A ? b + 0x20 : b)
            i = next
        }
        return out
    }

    /// Byte substring search (valid UTF-8 matches only at character boundaries).
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        if needle.isEmpty { return true }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if haystack[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }

    private static func strip(_ s: Substring) -> String {
        var s = s
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return String(s)
    }
}

/// A priority list that cannot be used (a usage error on the command line).
public struct SourcePriorityError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
