/// A small command-line parser: `--name value`, `--name=value`, `--flag`,
/// positionals. Validation happens before any work; mistakes are usage errors
/// (exit 2) with a one-line message.
public struct Arguments {
    public private(set) var positionals: [String] = []
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    public struct UsageError: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// Parses `arguments` knowing which options take a value and which are flags.
    public init(_ arguments: [String], options: Set<String>, flags known: Set<String>) throws {
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--" {
                positionals += arguments[(i + 1)...]
                break
            }
            if a.hasPrefix("--") {
                var name = String(a.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if known.contains(name) {
                    guard inline == nil else { throw UsageError("--\(name) takes no value") }
                    flags.insert(name)
                } else if options.contains(name) {
                    if let inline {
                        values[name] = inline
                    } else {
                        guard i + 1 < arguments.count else { throw UsageError("--\(name) needs a value") }
                        i += 1
                        values[name] = arguments[i]
                    }
                } else {
                    throw UsageError("unknown option --\(name)")
                }
            } else if a.hasPrefix("-") && a.count > 1 && a != "-h" {
                throw UsageError("unknown option \(a)")
            } else {
                positionals.append(a)
            }
            i += 1
        }
    }

    public func value(_ name: String) -> String? { values[name] }
    public func has(_ name: String) -> Bool { flags.contains(name) }

    /// The value of a required option.
    public func required(_ name: String) throws -> String {
        guard let v = values[name] else { throw UsageError("--\(name) is required") }
        return v
    }

    /// An integer option within `range`.
    public func integer(_ name: String, default fallback: Int, in range: ClosedRange<Int>) throws -> Int {
        guard let text = values[name] else { return fallback }
        guard let n = Int(text), range.contains(n) else {
            throw UsageError("--\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound), found '\(text)'")
        }
        return n
    }

    /// Fails when more positionals were given than the command takes.
    public func expectPositionals(_ count: Int, _ names: String) throws {
        if positionals.count < count { throw UsageError("missing \(names)") }
        if positionals.count > count { throw UsageError("unexpected argument '\(positionals[count])'") }
    }
}
