import StepLog

/// Builds JSON text into bytes without Foundation's encoders: uploads and
/// exports write one object per sample, millions of times.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma: [Bool] = [false]

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public var string: String { String(decoding: bytes, as: UTF8.self) }

    public mutating func beginObject() { separate(); bytes.append(0x7B); needsComma.append(false) }
    public mutating func endObject() { bytes.append(0x7D); needsComma.removeLast() }
    public mutating func beginArray() { separate(); bytes.append(0x5B); needsComma.append(false) }
    public mutating func endArray() { bytes.append(0x5D); needsComma.removeLast() }

    /// Writes `"name":` (the value follows).
    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(0x3A)
        needsComma[needsComma.count - 1] = false
    }

    public mutating func value(_ s: String) { separate(); appendQuoted(s) }
    public mutating func value(_ s: String?) { if let s { value(s) } else { null() } }
    public mutating func value(_ n: Int) { separate(); bytes.append(contentsOf: String(n).utf8) }
    public mutating func value(_ n: Int64) { separate(); bytes.append(contentsOf: String(n).utf8) }
    public mutating func value(_ b: Bool) { separate(); bytes.append(contentsOf: (b ? "true" : "false").utf8) }
    public mutating func value(_ d: Double, digits: Int = 4) {
        separate()
        bytes.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
    }
    public mutating func null() { separate(); bytes.append(contentsOf: "null".utf8) }

    /// A step count given in thousandths, as the wire has it (`StepCountText`):
    /// an integer when whole, else up to three decimals.
    public mutating func stepCount(thousandths: Int64) {
        if thousandths % 1000 == 0 { return value(thousandths / 1000) }
        separate()
        bytes.append(contentsOf: StepCountText.bytes(thousandths: thousandths))
    }

    /// An ISO 8601 UTC timestamp string.
    public mutating func timestamp(milliseconds: Int64) {
        separate()
        bytes.append(0x22)
        ISO8601.append(milliseconds: milliseconds, to: &bytes)
        bytes.append(0x22)
    }

    public mutating func field(_ name: String, _ v: String) { key(name); value(v) }
    public mutating func field(_ name: String, _ v: String?) { key(name); value(v) }
    public mutating func field(_ name: String, _ v: Int) { key(name); value(v) }
    public mutating func field(_ name: String, _ v: Int64) { key(name); value(v) }
    public mutating func field(_ name: String, _ v: Bool) { key(name); value(v) }

    private mutating func separate() {
        if needsComma[needsComma.count - 1] { bytes.append(0x2C) }
        needsComma[needsComma.count - 1] = true
    }

    /// A JSON string: quotes, backslashes and control characters escaped,
    /// everything else (any UTF-8) kept byte-exact.
    private mutating func appendQuoted(_ s: String) {
        bytes.append(0x22)
        for b in s.utf8 {
            switch b {
            case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
            case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: bytes.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: bytes.append(contentsOf: [0x5C, 0x72])
            case 0x09: bytes.append(contentsOf: [0x5C, 0x74])
            case 0..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            default: bytes.append(b)
            }
        }
        bytes.append(0x22)
    }
}
