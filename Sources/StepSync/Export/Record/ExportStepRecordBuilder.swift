import StepLog

/// Turns one top-level StepCount `<Record>` into an `ExportStepRecord` (or
/// the reason it cannot be one) and collects them.
///
/// Mapping: `sourceBundleId` = `sourceName` (the export has no bundle id),
/// `sourceDeviceName` = the `name:` field of `device`, `count` = the whole
/// number `value`, start/end = `startDate`/`endDate`, id = the derived
/// `ExportRecordIdentity`. Runs once per step record, so it works on the
/// scanner's bytes and allocates nothing in the common case.
///
/// A record with children is read in three calls: `begin` with its start
/// tag's attributes, `addMetadata` for each `MetadataEntry` child, and
/// `finish` at its end tag: the children belong to its identity. A
/// self-closing `<Record …/>` (most of them) is complete after `begin`.
/// Records outside the sample contract are never kept, but their sync
/// metadata still counts (a higher version replaces older ones).
final class ExportStepRecordBuilder {
    static let stepCountType: StaticString = "HKQuantityTypeIdentifierStepCount"
    static let syncIdentifierKey: StaticString = "HKMetadataKeySyncIdentifier"
    static let syncVersionKey: StaticString = "HKMetadataKeySyncVersion"

    enum Outcome: Equatable {
        /// A sample (open until `finish()` unless `begin` was told it is complete).
        case kept
        /// Not a sample at all (a missing or unreadable field); nothing is open.
        case malformed(String)
        /// Well-formed but outside the sample contract: never kept (open
        /// until `finish()` unless complete, for its sync metadata).
        case outOfContract(SampleContract.Violation)
    }

    private(set) var records: [ExportStepRecord] = []
    private(set) var sources = ExportSourceTable()
    private(set) var sync = ExportSyncTable()
    /// Records whose identity gained a metadata section: (the id they had
    /// before metadata counted, the id they have now).
    private(set) var reidentified: [(legacy: UUIDBytes, id: UUIDBytes)] = []
    /// The importer's clock, for the contract's "endDate ≤ now + 24 h".
    let now: SampleContract.Instant

    private var identity = ExportRecordIdentity.Encoder()
    private var deviceWithoutAddress: [UInt8] = []
    /// Room for the entity-decoded text fields of one record.
    private var scratch: UnsafeMutablePointer<UInt8>
    private var scratchCapacity = 4096

    /// The record between `begin` and `finish`.
    private struct OpenRecord {
        var record: ExportStepRecord
        var keep: Bool
    }
    private var open: OpenRecord?
    private var metadata = ExportRecordMetadata()

    /// `expectedRecords`: room reserved up front (an export holds many; the
    /// fuzz target, which builds two builders per input, reserves little).
    init(nowMilliseconds: Int64, expectedRecords: Int = 1 << 16) {
        now = SampleContract.Instant(milliseconds: nowMilliseconds)
        scratch = .allocate(capacity: scratchCapacity)
        records.reserveCapacity(expectedRecords)
    }

    deinit { scratch.deallocate() }

    /// Hands the collected records over (the builder is done after this).
    func takeRecords() -> [ExportStepRecord] {
        defer { records = [] }
        return records
    }

    /// Whether a record is open (its `MetadataEntry` children are wanted).
    var isOpen: Bool { open != nil }

    /// The start tag of a step record; `complete` when it is self-closing
    /// (no children follow, no `finish`).
    func begin(_ attributes: ExportRecordAttributes, complete: Bool) -> Outcome {
        if let problem = attributes.syntaxError { return .malformed(problem) }
        // Dates first: a missing or bad date is the most common defect, and
        // nothing needs decoding to find it.
        guard let startText = attributes.startDate else { return .malformed("missing startDate") }
        guard let start = Self.date(startText) else { return .malformed("bad startDate \(Self.quoted(startText))") }
        guard let endText = attributes.endDate else { return .malformed("missing endDate") }
        guard let end = Self.date(endText) else { return .malformed("bad endDate \(Self.quoted(endText))") }
        var creation: Int64?
        if let creationText = attributes.creationDate {
            guard let parsed = Self.date(creationText) else { return .malformed("bad creationDate \(Self.quoted(creationText))") }
            creation = parsed
        }
        guard let sourceNameText = attributes.sourceName else { return .malformed("missing sourceName") }
        guard let valueText = attributes.value else { return .malformed("missing value") }

        // Decode the text fields into the scratch area, one after another.
        let needed = sourceNameText.count + (attributes.sourceVersion?.count ?? 0) + (attributes.device?.count ?? 0)
            + (attributes.unit?.count ?? 0) + valueText.count
        if needed > scratchCapacity {
            scratch.deallocate()
            scratchCapacity = max(needed, scratchCapacity * 2)
            scratch = .allocate(capacity: scratchCapacity)
        }
        var used = 0
        func decoded(_ field: UnsafeBufferPointer<UInt8>?) -> UnsafeBufferPointer<UInt8>? {
            guard let field, let base = field.baseAddress else { return field }
            guard ExportByteSearch.find(UInt8(ascii: "&"), in: base, from: 0, to: field.count) != nil else { return field }
            let length = ExportEntityDecoder.decode(base, count: field.count, into: scratch + used)
            defer { used += length }
            return UnsafeBufferPointer(start: scratch + used, count: length)
        }
        let sourceName = decoded(sourceNameText)!
        let value = decoded(valueText)!
        let sourceVersion = decoded(attributes.sourceVersion)
        let device = decoded(attributes.device)
        let unit = decoded(attributes.unit)

        let count: UInt32
        switch Self.wholeNumber(value) {
        case .success(let n): count = n
        case .failure(let problem): return .malformed(problem.reason)
        }

        // The sample contract. Names too long to be kept are refused before
        // they are interned, so a hostile file cannot fill the source table.
        let deviceName = device.flatMap { ExportDeviceString.name($0) }
        var violation: SampleContract.Violation?
        if sourceName.count > SampleContract.maxSourceBundleIdBytes {
            violation = .init(.sourceBundleId, "sourceBundleId is \(sourceName.count) bytes (at most \(SampleContract.maxSourceBundleIdBytes))")
        } else if let deviceName, deviceName.count > SampleContract.maxSourceDeviceNameBytes {
            violation = .init(.sourceDeviceName, "sourceDeviceName is \(deviceName.count) bytes (at most \(SampleContract.maxSourceDeviceNameBytes))")
        }
        var source: UInt32 = 0
        if violation == nil {
            source = sources.intern(sourceName: sourceName, deviceName: deviceName)
            violation = SampleContract.checkDates(start: .init(milliseconds: start), end: .init(milliseconds: end), now: now)
                ?? SampleContract.checkCount(Int(count)) ?? sources.violation(at: source)
        }

        identity.start()
        Self.stepCountType.withUTF8Buffer { identity.text($0) }
        identity.text(sourceName)
        identity.text(sourceVersion)
        if let device {
            deviceWithoutAddress.removeAll(keepingCapacity: true)
            ExportDeviceString.withoutAddress(device, into: &deviceWithoutAddress)
            deviceWithoutAddress.withUnsafeBufferPointer { identity.text($0) }
        } else {
            identity.text(nil)
        }
        identity.text(unit)
        identity.instant(creation)
        identity.instant(start)
        identity.instant(end)
        identity.text(value)
        var record = ExportStepRecord(startMilliseconds: start, endMilliseconds: end, idHigh: 0, idLow: 0, count: count, source: source)
        if complete {
            // No metadata: the identity is complete, and there is no sync identifier.
            guard let violation else {
                let id = identity.uuid()
                record.idHigh = id.high
                record.idLow = id.low
                records.append(record)
                return .kept
            }
            return .outOfContract(violation)
        }
        open = OpenRecord(record: record, keep: violation == nil)
        metadata.removeAll()
        if violation == nil { return .kept }
        // The sync table needs the name of an unkept record's source.
        syncSourceName.removeAll(keepingCapacity: true)
        syncSourceName.append(contentsOf: sourceName)
        return .outOfContract(violation!)
    }

    /// The source name of an open record outside the contract (not interned).
    private var syncSourceName: [UInt8] = []

    /// A `<MetadataEntry>` child of the open record (raw attribute bytes).
    func addMetadata(key: UnsafeBufferPointer<UInt8>?, value: UnsafeBufferPointer<UInt8>?) {
        guard open != nil else { return }
        metadata.append(key: key, value: value)
    }

    /// Ends the open record: its identity is complete.
    func finish() {
        guard var current = open else { return }
        open = nil
        let legacy = identity.uuid()
        var id = legacy
        if !metadata.isEmpty {
            identity.metadata(metadata)
            id = identity.uuid()
        }
        current.record.idHigh = id.high
        current.record.idLow = id.low
        if current.keep {
            records.append(current.record)
            if id != legacy { reidentified.append((legacy, id)) }
        }
        guard let identifier = metadata.value(forKey: Self.syncIdentifierKey) else { return }
        let version = metadata.value(forKey: Self.syncVersionKey)
        metadata.bytes.withUnsafeBufferPointer { all in
            func slice(_ range: Range<Int>) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: all[range]) }
            let add = { (sourceName: UnsafeBufferPointer<UInt8>) in
                self.sync.add(id: current.keep ? id : nil, startMilliseconds: current.record.startMilliseconds,
                              sourceName: sourceName, identifier: slice(identifier), version: version.map(slice))
            }
            if current.keep {
                Array(sources.sources[Int(current.record.source)].sourceBundleId.utf8).withUnsafeBufferPointer(add)
            } else {
                syncSourceName.withUnsafeBufferPointer(add)
            }
        }
    }

    private static func date(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard let base = text.baseAddress else { return nil }
        return ExportDateParser.milliseconds(base, count: text.count)
    }

    struct ValueProblem: Error {
        var reason: String
    }

    /// "12", "12.0", "12." → 12. Anything else (a fraction, a sign, an
    /// exponent, spaces, a count beyond UInt32) is a malformed record: steps
    /// are whole, and guessing a rounding would invent data.
    static func wholeNumber(_ text: UnsafeBufferPointer<UInt8>) -> Result<UInt32, ValueProblem> {
        guard !text.isEmpty else { return .failure(ValueProblem(reason: "empty value")) }
        var value: UInt64 = 0
        var i = 0
        while i < text.count, text[i] >= UInt8(ascii: "0"), text[i] <= UInt8(ascii: "9") {
            value = value * 10 + UInt64(text[i] - UInt8(ascii: "0"))
            if value > UInt64(UInt32.max) { return .failure(ValueProblem(reason: "value \(quoted(text)) is too large for a step count")) }
            i += 1
        }
        let integerDigits = i
        if i < text.count, text[i] == UInt8(ascii: ".") {
            i += 1
            var fractionIsZero = true
            let fractionStart = i
            while i < text.count, text[i] >= UInt8(ascii: "0"), text[i] <= UInt8(ascii: "9") {
                if text[i] != UInt8(ascii: "0") { fractionIsZero = false }
                i += 1
            }
            if i == text.count, integerDigits > 0 || i > fractionStart, !fractionIsZero {
                return .failure(ValueProblem(reason: "value \(quoted(text)) is not a whole number"))
            }
        }
        guard i == text.count, integerDigits > 0 else {
            if text[0] == UInt8(ascii: "-") { return .failure(ValueProblem(reason: "value \(quoted(text)) is negative")) }
            return .failure(ValueProblem(reason: "value \(quoted(text)) is not a number"))
        }
        return .success(UInt32(value))
    }

    /// A value for a message: quoted, at most 40 bytes of it.
    static func quoted(_ text: UnsafeBufferPointer<UInt8>) -> String {
        let shown = String(decoding: text.prefix(40), as: UTF8.self)
        return "\"" + shown + (text.count > 40 ? "…\"" : "\"")
    }
}
