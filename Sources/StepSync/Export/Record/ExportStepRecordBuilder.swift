import StepLog

/// Turns one top-level StepCount `<Record>` into an `ExportStepRecord` (or
/// the reason it cannot be one) and collects them.
///
/// Mapping: `sourceBundleId` = `sourceName` (`source` in iOS 8 exports; the
/// export has no bundle id), `sourceDeviceName` = the `name:` field of
/// `device`, `count` = `value` in thousandths of a step, start/end =
/// `startDate`/`endDate`, id = the derived `ExportRecordIdentity`. Records an
/// Apple device wrote itself mark their source (`ExportSourceTable`), whose
/// samples then carry Apple's per-device bundle id. Runs once per step
/// record, so it works on the scanner's bytes and allocates nothing in the
/// common case.
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
    static let wasUserEnteredKey: StaticString = "HKWasUserEntered"

    enum Outcome: Equatable {
        /// A sample (open until `finish()` unless `begin` was told it is complete).
        case kept
        /// Not a sample at all (a missing or unreadable field, a value that
        /// is not a step count); nothing is open.
        case malformed(String, Malformation)
        /// Well-formed but outside the sample contract: never kept (open
        /// until `finish()` unless complete, for its sync metadata).
        case outOfContract(SampleContract.Violation)
    }

    /// What kind of field made a record malformed.
    enum Malformation: Equatable {
        /// A date, the source's name, the tag's syntax: what an export in a
        /// format this reader does not know would break.
        case field
        /// The value is not a step count (empty, negative, not a number, too large).
        case value
    }

    /// Step records whose value has a fraction (`2741.7`, kept in thousandths),
    /// and of them those with digits past the third decimal, rounded (`ExportStepValue`).
    private(set) var fractionalValues = 0
    private(set) var roundedValues = 0

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
        /// Its device string says an Apple device wrote it itself: it marks
        /// its source at `finish()` unless it was entered by hand.
        var byAppleDevice: Bool
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

    /// The sources, once every record is read, with Apple's devices known
    /// (`ExportSourceTable.resolveAppleDevices`).
    func resolvedSources() -> [ExportSourceTable.Source] {
        sources.resolveAppleDevices()
        return sources.sources
    }

    /// Whether a record is open (its `MetadataEntry` children are wanted).
    var isOpen: Bool { open != nil }

    /// The start tag of a step record; `complete` when it is self-closing
    /// (no children follow, no `finish`); `syntaxError` when its attributes
    /// could not be read one by one (no `=`, no quote).
    func begin(_ attributes: ExportRecordAttributes, syntaxError: String? = nil, complete: Bool) -> Outcome {
        if let problem = syntaxError { return .malformed(problem, .field) }
        // Dates first: a missing or bad date is the most common defect, and
        // nothing needs decoding to find it.
        guard let startText = attributes.startDate else { return .malformed("missing startDate", .field) }
        guard let start = Self.date(startText) else { return .malformed("bad startDate \(Self.quoted(startText))", .field) }
        guard let endText = attributes.endDate else { return .malformed("missing endDate", .field) }
        guard let end = Self.date(endText) else { return .malformed("bad endDate \(Self.quoted(endText))", .field) }
        var creation: Int64?
        if let creationText = attributes.creationDate {
            guard let parsed = Self.date(creationText) else {
                return .malformed("bad creationDate \(Self.quoted(creationText))", .field)
            }
            creation = parsed
        }
        guard let sourceNameText = attributes.sourceName else { return .malformed("missing sourceName", .field) }
        guard let valueText = attributes.value else { return .malformed("missing value", .field) }

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

        let thousandths: UInt64
        switch ExportStepValue.parse(value) {
        case .success(let parsed):
            thousandths = parsed.thousandths
            if parsed.hasFraction { fractionalValues += 1 }
            if parsed.finerThanThousandths { roundedValues += 1 }
        case .failure(let problem):
            return .malformed(problem.reason, .value)
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
        var byAppleDevice = false
        if violation == nil {
            source = sources.intern(sourceName: sourceName, deviceName: deviceName)
            violation = SampleContract.checkDates(start: .init(milliseconds: start), end: .init(milliseconds: end), now: now)
                ?? SampleContract.checkCount(thousandths: Int64(thousandths)) ?? sources.violation(at: source)
            if let device, !sources.isAppleDevice(source) {
                byAppleDevice = ExportDeviceString.isAppleDeviceItself(device, sourceVersion: sourceVersion)
                if byAppleDevice, complete { sources.markAppleDevice(source) }
            }
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
        var record = ExportStepRecord(startMilliseconds: start, endMilliseconds: end, idHigh: 0, idLow: 0,
                                     countThousandths: UInt32(clamping: thousandths), source: source)
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
        open = OpenRecord(record: record, keep: violation == nil, byAppleDevice: byAppleDevice)
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
        if current.byAppleDevice, !enteredByHand {
            sources.markAppleDevice(current.record.source)
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
                Array(sources.sources[Int(current.record.source)].sourceName.utf8).withUnsafeBufferPointer(add)
            } else {
                syncSourceName.withUnsafeBufferPointer(add)
            }
        }
    }

    /// Whether the open record's metadata says it was entered by hand
    /// (`HKWasUserEntered` = 1): not the device's own measurement.
    private var enteredByHand: Bool {
        guard let range = metadata.value(forKey: Self.wasUserEnteredKey) else { return false }
        return metadata.bytes[range].elementsEqual("1".utf8)
    }

    private static func date(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard let base = text.baseAddress else { return nil }
        return ExportDateParser.milliseconds(base, count: text.count)
    }

    static func quoted(_ text: UnsafeBufferPointer<UInt8>) -> String { ExportStepValue.quoted(text) }
}
