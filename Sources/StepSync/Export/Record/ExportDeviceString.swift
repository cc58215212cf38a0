/// The `device` attribute of an export record, once entities are decoded: the
/// description HealthKit prints for an `HKDevice`, e.g.
/// `<<HKDevice: 0x282a45810>, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch2,4, software:4.3.1>`.
enum ExportDeviceString {
    /// The `name:` field ("Apple Watch"), or nil when there is none or it is
    /// empty. The value runs to the next ", key:" (a comma, a space, then
    /// letters or digits and a colon) or to the description's closing `>`, so
    /// commas inside values such as `hardware:Watch2,4` do not cut it.
    static func name(_ device: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8>? {
        guard let base = device.baseAddress else { return nil }
        let count = device.count
        var start: Int?
        if ExportByteSearch.hasPrefix(base, 0, count, "name:") {
            start = 5
        } else if let hit = ExportByteSearch.find(", name:", in: base, from: 0, to: count) {
            start = hit + 7
        }
        guard let valueStart = start else { return nil }
        var end = count
        if end > valueStart, base[end - 1] == UInt8(ascii: ">") { end -= 1 }
        var i = valueStart
        while let comma = ExportByteSearch.find(UInt8(ascii: ","), in: base, from: i, to: end) {
            if isFieldStart(base, comma, end) {
                end = comma
                break
            }
            i = comma + 1
        }
        guard end > valueStart else { return nil }
        return UnsafeBufferPointer(start: base + valueStart, count: end - valueStart)
    }

    /// Whether ", key:" starts at `comma`.
    private static func isFieldStart(_ base: UnsafePointer<UInt8>, _ comma: Int, _ end: Int) -> Bool {
        var i = comma + 1
        guard i < end, base[i] == UInt8(ascii: " ") else { return false }
        i += 1
        let keyStart = i
        while i < end, isKeyByte(base[i]) { i += 1 }
        return i > keyStart && i < end && base[i] == UInt8(ascii: ":")
    }

    @inline(__always)
    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// Whether the device string says an Apple device wrote the record
    /// itself, not an app running on it: `manufacturer:Apple…`, a `model:` of
    /// `iPhone`, `Watch` or `iPod…`, and a `software:` version equal to the
    /// record's `sourceVersion` (the source of an Apple device's own samples is
    /// its operating system, whose version both fields carry; an app that
    /// stamps its samples with the phone's `HKDevice` has a version of its own).
    static func isAppleDeviceItself(_ device: UnsafeBufferPointer<UInt8>, sourceVersion: UnsafeBufferPointer<UInt8>?) -> Bool {
        guard let sourceVersion, !sourceVersion.isEmpty, let base = device.baseAddress else { return false }
        let count = device.count
        guard let manufacturer = ExportByteSearch.find(", manufacturer:", in: base, from: 0, to: count),
              ExportByteSearch.hasPrefix(base, manufacturer + 15, count, "Apple"),
              let model = ExportByteSearch.find(", model:", in: base, from: manufacturer, to: count),
              let software = ExportByteSearch.find(", software:", in: base, from: model, to: count)
        else { return false }
        let modelStart = model + 8
        guard fieldIs("iPhone", base, modelStart, count) || fieldIs("Watch", base, modelStart, count)
                || ExportByteSearch.hasPrefix(base, modelStart, count, "iPod")
        else { return false }
        let versionStart = software + 11
        guard count - versionStart >= sourceVersion.count,
              UnsafeBufferPointer(start: base + versionStart, count: sourceVersion.count).elementsEqual(sourceVersion)
        else { return false }
        return isFieldEnd(base, versionStart + sourceVersion.count, count)
    }

    /// Whether the field value at `start` is exactly `text` (then `,`, `>` or the end).
    private static func fieldIs(_ text: StaticString, _ base: UnsafePointer<UInt8>, _ start: Int, _ count: Int) -> Bool {
        ExportByteSearch.hasPrefix(base, start, count, text) && isFieldEnd(base, start + text.utf8CodeUnitCount, count)
    }

    @inline(__always)
    private static func isFieldEnd(_ base: UnsafePointer<UInt8>, _ i: Int, _ count: Int) -> Bool {
        i == count || base[i] == UInt8(ascii: ",") || base[i] == UInt8(ascii: ">")
    }

    /// The device string without its memory address: the hex digits (and
    /// their `0x`) after `HKDevice: ` are dropped, because the address is where
    /// the object happened to live when the export was written and changes
    /// from one export to the next, while the device is the same.
    static func withoutAddress(_ device: UnsafeBufferPointer<UInt8>, into output: inout [UInt8]) {
        guard let base = device.baseAddress else { return }
        let count = device.count
        guard let hit = ExportByteSearch.find("HKDevice: 0x", in: base, from: 0, to: count) else {
            output.append(contentsOf: device)
            return
        }
        let keep = hit + 10                                   // through "HKDevice: "
        var i = keep + 2                                      // past "0x"
        while i < count, isHexDigit(base[i]) { i += 1 }
        output.append(contentsOf: UnsafeBufferPointer(start: base, count: keep))
        output.append(contentsOf: UnsafeBufferPointer(start: base + i, count: count - i))
    }

    @inline(__always)
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}
