/// The attribute values of one `<Record>` start tag as the scanner found
/// them: raw bytes between the quotes (entities not yet decoded), pointing
/// into the scanner's buffer and valid only while that tag is handled. Plain
/// values only, so one costs nothing to reset or copy.
struct ExportRecordAttributes {
    var type: UnsafeBufferPointer<UInt8>?
    /// `sourceName`, or in an iOS 8 export (which has no `sourceName`) `source`.
    var sourceName: UnsafeBufferPointer<UInt8>?
    var sourceVersion: UnsafeBufferPointer<UInt8>?
    var device: UnsafeBufferPointer<UInt8>?
    var unit: UnsafeBufferPointer<UInt8>?
    var creationDate: UnsafeBufferPointer<UInt8>?
    var startDate: UnsafeBufferPointer<UInt8>?
    var endDate: UnsafeBufferPointer<UInt8>?
    var value: UnsafeBufferPointer<UInt8>?

    /// Stores `value` under the attribute `name` when it is one a step record
    /// uses; returns true when `name` is `type`. Names are compared by length
    /// first, so most comparisons are one integer test.
    @inline(__always)
    mutating func set(name base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int, value: UnsafeBufferPointer<UInt8>) -> Bool {
        switch count {
        case 4:
            if ExportByteSearch.equals(base, offset, 4, "type") { type = value; return true }
            if ExportByteSearch.equals(base, offset, 4, "unit") { unit = value }
        case 5:
            if ExportByteSearch.equals(base, offset, 5, "value") { self.value = value }
        case 6:
            if ExportByteSearch.equals(base, offset, 6, "device") {
                device = value
            } else if sourceName == nil, ExportByteSearch.equals(base, offset, 6, "source") {
                sourceName = value
            }
        case 7:
            if ExportByteSearch.equals(base, offset, 7, "endDate") { endDate = value }
        case 9:
            if ExportByteSearch.equals(base, offset, 9, "startDate") { startDate = value }
        case 10:
            if ExportByteSearch.equals(base, offset, 10, "sourceName") { sourceName = value }
        case 12:
            if ExportByteSearch.equals(base, offset, 12, "creationDate") { creationDate = value }
        case 13:
            if ExportByteSearch.equals(base, offset, 13, "sourceVersion") { sourceVersion = value }
        default:
            break
        }
        return false
    }

    /// Whether `name` is a step attribute this tag already gave a value
    /// (`source` counts as `sourceName`).
    func alreadyHas(name base: UnsafePointer<UInt8>, _ offset: Int, _ count: Int) -> Bool {
        var probe = ExportRecordAttributes()
        _ = probe.set(name: base, offset, count, value: UnsafeBufferPointer(start: base, count: 0))
        return (probe.type != nil && type != nil) || (probe.sourceName != nil && sourceName != nil)
            || (probe.sourceVersion != nil && sourceVersion != nil) || (probe.device != nil && device != nil)
            || (probe.unit != nil && unit != nil) || (probe.creationDate != nil && creationDate != nil)
            || (probe.startDate != nil && startDate != nil) || (probe.endDate != nil && endDate != nil)
            || (probe.value != nil && value != nil)
    }
}
