import StepSync

/// Writes a synthetic but realistic export.xml, day by day, from a seed:
/// the DTD, ExportDate, Me, then interleaved records (StepCount from an
/// iPhone and an Apple Watch with overlapping times, HeartRate with
/// MetadataEntry children, energy, distance, flights, stand time, a
/// third-party app's records with sync metadata), BloodPressure Correlations
/// whose Records are also printed at top level, Workouts with events and a
/// WorkoutRoute of Locations, and an ActivitySummary per day. The same seed
/// gives the same bytes. `stepbench export generate` writes benchmark
/// exports with it; tests read its output back.
public struct SyntheticExportWriter {
    private var random: SplitMix64
    private let output: ([UInt8]) throws -> Void
    private var buffer: [UInt8] = []
    public private(set) var bytesWritten: Int64 = 0
    /// Top-level StepCount records written.
    public private(set) var stepRecords = 0
    public private(set) var days = 0

    /// `output` receives the XML in pieces of about 4 MiB, in order.
    public init(seed: UInt64, output: @escaping ([UInt8]) throws -> Void) {
        random = SplitMix64(seed: seed)
        self.output = output
        buffer.reserveCapacity(Self.flushThreshold + (1 << 20))
    }

    static let flushThreshold = 4 << 20
    static let iPhoneSource = "Jane’s iPhone"
    static let watchSource = "Jane’s Apple\u{00A0}Watch"
    static func iPhoneDevice(_ address: String) -> String {
        "&lt;&lt;HKDevice: 0x\(address)&gt;, name:iPhone, manufacturer:Apple Inc., model:iPhone, hardware:iPhone12,1, software:15.4.1&gt;"
    }
    static func watchDevice(_ address: String) -> String {
        "&lt;&lt;HKDevice: 0x\(address)&gt;, name:Apple Watch, manufacturer:Apple Inc., model:Watch, hardware:Watch6,2, software:8.5&gt;"
    }

    /// Whether the document carries the iOS 16 inline DTD.
    public var includeDTD = true
    /// The `<ExportDate>` value.
    public var exportDate = "2024-06-30 21:14:05 -0700"
    /// The fraction of StepCount records left out, as in a newer export of
    /// the same Health store after deletions: the decision for the n-th step
    /// record depends on the seed and n alone, and every random draw is still
    /// made, so every other byte is the same as without it.
    public var droppedStepFraction = 0.0
    /// StepCount records left out by `droppedStepFraction`.
    public private(set) var stepRecordsDropped = 0
    private var stepIndex: UInt64 = 0

    /// Writes whole days until at least `target` bytes, then closes the document.
    public mutating func writeExport(atLeast target: Int64) throws {
        append(SyntheticExport.head(dtd: includeDTD ? SyntheticExport.iOS16DTD : nil, exportDate: exportDate).joined(separator: "\n") + "\n")
        // Day 0 is 2014-09-20 (Apple Health's first autumn), local midnight.
        let firstDay: Int64 = 16_333
        var day = firstDay
        while bytesWritten + Int64(buffer.count) < target {
            writeDay(day)
            day += 1
            days += 1
            if buffer.count >= Self.flushThreshold { try flush() }
        }
        append("</HealthData>\n")
        try flush()
    }

    private mutating func flush() throws {
        try output(buffer)
        bytesWritten += Int64(buffer.count)
        buffer.removeAll(keepingCapacity: true)
    }

    /// UTC offset in minutes for a day: Pacific time with DST, and a week in
    /// Europe every ~200 days (offsets change inside a file).
    private func offsetMinutes(_ day: Int64) -> Int {
        if day % 200 < 7 { return 60 }
        let dayOfYear = (day + 365 * 100) % 365
        return (dayOfYear >= 70 && dayOfYear < 308) ? -420 : -480
    }

    private mutating func writeDay(_ day: Int64) {
        let offset = offsetMinutes(day)
        let midnight = (day * 86_400 - Int64(offset) * 60) * 1_000      // local midnight as UTC ms
        let iPhone = Self.iPhoneDevice(String(0x2_83D1_C0F0 + Int(random.next() % 4096) * 16, radix: 16))
        let watch = Self.watchDevice(String(0x2_83D1_C410 + Int(random.next() % 4096) * 16, radix: 16))

        // Interleave by time: walk the waking day in 4-minute slots and emit
        // whatever each source would have recorded in it.
        var minute = 6 * 60 + 30 + Int(random.next() % 60)
        let bedtime = 22 * 60 + Int(random.next() % 90)
        var correlationDone = false
        let workoutMinute = day % 2 == 0 ? 17 * 60 + Int(random.next() % 60) : -1
        while minute < bedtime {
            let t = midnight + Int64(minute) * 60_000
            // Apple Watch: heart rate often, energy, distance and steps per active slot.
            writeQuantity("HKQuantityTypeIdentifierHeartRate", Self.watchSource, "8.5", watch, "count/min",
                          start: t, end: t, offset: offset, value: String(58 + Int(random.next() % 60)),
                          metadata: [("HKMetadataKeyHeartRateMotionContext", String(random.next() % 3))])
            writeQuantity("HKQuantityTypeIdentifierActiveEnergyBurned", Self.watchSource, "8.5", watch, "kcal",
                          start: t, end: t + 60_000 * 3, offset: offset, value: decimal(random.next() % 20_000, 3))
            if random.next() % 2 == 0 {
                writeQuantity("HKQuantityTypeIdentifierEnvironmentalAudioExposure", Self.watchSource, "8.5", watch, "dBASPL",
                              start: t, end: t + 60_000 * 3, offset: offset, value: decimal(45_000 + random.next() % 40_000, 4))
            }
            if random.next() % 40 == 0 {
                // A third-party app's record: sync metadata with random ids,
                // as real exports carry (and far less compressible).
                writeQuantity("HKQuantityTypeIdentifierDietaryWater", "WaterMinder", "5.2.1", nil, "mL",
                              start: t, end: t, offset: offset, value: String(100 + random.next() % 400),
                              metadata: [("HKMetadataKeySyncIdentifier", randomUUIDText()),
                                         ("HKMetadataKeySyncVersion", "1"),
                                         ("HKExternalUUID", randomUUIDText())])
            }
            if random.next() % 3 == 0 {
                writeQuantity("HKQuantityTypeIdentifierBasalEnergyBurned", Self.watchSource, "8.5", watch, "kcal",
                              start: t, end: t + 60_000 * 4, offset: offset, value: decimal(3_000 + random.next() % 2_000, 3))
            }
            if random.next() % 2 == 0 {
                let steps = 20 + Int(random.next() % 400)
                let length = Int64(60_000 * (1 + random.next() % 4))
                let mark = buffer.count
                writeQuantity("HKQuantityTypeIdentifierStepCount", Self.watchSource, "8.5", watch, "count",
                              start: t, end: t + length, offset: offset, value: String(steps))
                dropStepRecordIfChosen(writtenFrom: mark)
                writeQuantity("HKQuantityTypeIdentifierDistanceWalkingRunning", Self.watchSource, "8.5", watch, "km",
                              start: t, end: t + length, offset: offset, value: decimal(UInt64(steps) * 7, 4))
                stepRecords += 1
            }
            // iPhone: fewer, longer step samples overlapping the Watch's.
            if minute % 20 < 4 {
                let length = Int64(60_000 * (5 + random.next() % 10))
                let mark = buffer.count
                writeQuantity("HKQuantityTypeIdentifierStepCount", Self.iPhoneSource, "15.4.1", iPhone, "count",
                              start: t - 60_000, end: t + length, offset: offset, value: String(50 + Int(random.next() % 900)))
                dropStepRecordIfChosen(writtenFrom: mark)
                writeQuantity("HKQuantityTypeIdentifierDistanceWalkingRunning", Self.iPhoneSource, "15.4.1", iPhone, "km",
                              start: t - 60_000, end: t + length, offset: offset, value: decimal(random.next() % 900_000, 6))
                stepRecords += 1
            }
            if minute % 60 < 4 {
                writeQuantity("HKQuantityTypeIdentifierAppleStandTime", Self.watchSource, "8.5", watch, "min",
                              start: t, end: t + 60_000 * 5, offset: offset, value: String(1 + random.next() % 5))
                if random.next() % 4 == 0 {
                    writeQuantity("HKQuantityTypeIdentifierFlightsClimbed", Self.iPhoneSource, "15.4.1", iPhone, "count",
                                  start: t, end: t + 60_000 * 2, offset: offset, value: String(1 + random.next() % 3))
                }
            }
            if !correlationDone, day % 7 == 0, minute >= 8 * 60 {
                writeBloodPressure(t, offset: offset)
                correlationDone = true
            }
            if workoutMinute >= 0, minute >= workoutMinute, minute < workoutMinute + 4 {
                writeWorkout(t, offset: offset, watch: watch)
            }
            minute += 4
        }
        writeActivitySummary(day)
    }

    /// Takes the step record just written (from `mark`) out again when
    /// `droppedStepFraction` chooses it. Counted in `stepRecords` either way
    /// (the records the full export has), and in `stepRecordsDropped`.
    private mutating func dropStepRecordIfChosen(writtenFrom mark: Int) {
        defer { stepIndex += 1 }
        guard droppedStepFraction > 0 else { return }
        var pick = SplitMix64(seed: stepIndex ^ 0x4452_4F50_0000_0000)
        guard Double(pick.next() >> 11) / 9_007_199_254_740_992 < droppedStepFraction else { return }
        buffer.removeSubrange(mark..<buffer.count)
        stepRecordsDropped += 1
    }

    private mutating func writeQuantity(_ type: String, _ source: String, _ version: String, _ device: String?,
                                        _ unit: String, start: Int64, end: Int64, offset: Int,
                                        value: String, metadata: [(String, String)] = [], indent: String = " ") {
        append(indent)
        append("<Record type=\"\(type)\" sourceName=\"\(source)\" sourceVersion=\"\(version)\"")
        if let device { append(" device=\"\(device)\"") }
        append(" unit=\"\(unit)\" creationDate=\"")
        appendTimes(creation: end + 1_000 * Int64(5 + random.next() % 600), start: start, end: end, offset: offset)
        append("\" value=\"\(value)\"")
        if metadata.isEmpty {
            append("/>\n")
        } else {
            append(">\n")
            for (key, value) in metadata {
                append(indent + "  <MetadataEntry key=\"\(key)\" value=\"\(value)\"/>\n")
            }
            append(indent + "</Record>\n")
        }
    }

    private mutating func writeBloodPressure(_ t: Int64, offset: Int) {
        let systolic = String(105 + random.next() % 30), diastolic = String(65 + random.next() % 20)
        let source = "Omron Connect"
        let creation = t + 30_000
        for indent in [" ", "  "] {
            if indent == "  " {
                append(" <Correlation type=\"HKCorrelationTypeIdentifierBloodPressure\" sourceName=\"\(source)\" sourceVersion=\"7.2\" creationDate=\"")
                appendTimes(creation: creation, start: t, end: t, offset: offset)
                append("\">\n  <MetadataEntry key=\"HKWasUserEntered\" value=\"0\"/>\n")
            }
            for (type, value) in [("HKQuantityTypeIdentifierBloodPressureSystolic", systolic),
                                  ("HKQuantityTypeIdentifierBloodPressureDiastolic", diastolic)] {
                append(indent)
                append("<Record type=\"\(type)\" sourceName=\"\(source)\" sourceVersion=\"7.2\" unit=\"mmHg\" creationDate=\"")
                appendTimes(creation: creation, start: t, end: t, offset: offset)
                append("\" value=\"\(value)\"/>\n")
            }
            if indent == "  " { append(" </Correlation>\n") }
        }
    }

    private mutating func writeWorkout(_ t: Int64, offset: Int, watch: String) {
        let minutes = 20 + Int64(random.next() % 40)
        let end = t + minutes * 60_000
        append(" <Workout workoutActivityType=\"HKWorkoutActivityTypeRunning\" duration=\"\(minutes)\" durationUnit=\"min\" totalDistance=\"\(decimal(UInt64(minutes) * 160, 3))\" totalDistanceUnit=\"km\" totalEnergyBurned=\"\(decimal(UInt64(minutes) * 11_000, 3))\" totalEnergyBurnedUnit=\"kcal\" sourceName=\"\(Self.watchSource)\" sourceVersion=\"8.5\" device=\"\(watch)\" creationDate=\"")
        appendTimes(creation: end + 5_000, start: t, end: end, offset: offset)
        append("\">\n  <MetadataEntry key=\"HKIndoorWorkout\" value=\"0\"/>\n  <MetadataEntry key=\"HKTimeZone\" value=\"America/Los_Angeles\"/>\n  <MetadataEntry key=\"HKWeatherTemperature\" value=\"61 degF\"/>\n")
        append("  <WorkoutEvent type=\"HKWorkoutEventTypePause\" date=\"")
        appendDate(t + 600_000, offset: offset)
        append("\"/>\n  <WorkoutEvent type=\"HKWorkoutEventTypeResume\" date=\"")
        appendDate(t + 660_000, offset: offset)
        append("\"/>\n  <WorkoutRoute sourceName=\"\(Self.iPhoneSource)\" sourceVersion=\"15.4.1\" creationDate=\"")
        appendTimes(creation: end + 9_000, start: t, end: end, offset: offset)
        append("\">\n   <MetadataEntry key=\"HKMetadataKeySyncVersion\" value=\"2\"/>\n")
        var latitude = 37_777_700 + Int(random.next() % 1000), longitude = -122_426_000 - Int(random.next() % 1000)
        for k in 0..<24 {
            latitude += Int(random.next() % 40) - 15
            longitude += Int(random.next() % 40) - 15
            append("   <Location date=\"")
            appendDate(t + Int64(k) * 5_000, offset: offset)
            append("\" latitude=\"\(signedDecimal(latitude, 6))\" longitude=\"\(signedDecimal(longitude, 6))\" altitude=\"\(decimal(20_000 + random.next() % 3_000, 3))\" horizontalAccuracy=\"2.40948\" verticalAccuracy=\"1.67859\" course=\"-1\" speed=\"\(decimal(2_000 + random.next() % 1_000, 3))\"/>\n")
        }
        append("  </WorkoutRoute>\n </Workout>\n")
    }

    private mutating func writeActivitySummary(_ day: Int64) {
        let (y, m, d) = ISO8601.civil(fromDays: day)
        append(" <ActivitySummary dateComponents=\"\(y)-\(pad(m))-\(pad(d))\" activeEnergyBurned=\"\(decimal(300_000 + random.next() % 400_000, 3))\" activeEnergyBurnedGoal=\"630\" activeEnergyBurnedUnit=\"kcal\" appleMoveTime=\"0\" appleMoveTimeGoal=\"0\" appleExerciseTime=\"\(random.next() % 90)\" appleExerciseTimeGoal=\"30\" appleStandHours=\"\(6 + random.next() % 10)\" appleStandHoursGoal=\"12\"/>\n")
    }

    // MARK: Formatting

    private mutating func append(_ text: String) {
        buffer.append(contentsOf: text.utf8)
    }

    /// The creation date (its attribute already opened), then the
    /// `startDate` and `endDate` attributes, leaving the last quote open.
    private mutating func appendTimes(creation: Int64, start: Int64, end: Int64, offset: Int) {
        appendDate(creation, offset: offset)
        append("\" startDate=\"")
        appendDate(start, offset: offset)
        append("\" endDate=\"")
        appendDate(end, offset: offset)
    }

    /// `yyyy-MM-dd HH:mm:ss ±HHMM` of `milliseconds` in the given UTC offset.
    private mutating func appendDate(_ milliseconds: Int64, offset: Int) {
        let local = milliseconds / 1_000 + Int64(offset) * 60
        let day = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        let second = Int(local - day * 86_400)
        let (y, m, d) = ISO8601.civil(fromDays: day)
        appendDigits(Int(y), 4); buffer.append(UInt8(ascii: "-"))
        appendDigits(m, 2); buffer.append(UInt8(ascii: "-"))
        appendDigits(d, 2); buffer.append(UInt8(ascii: " "))
        appendDigits(second / 3_600, 2); buffer.append(UInt8(ascii: ":"))
        appendDigits(second / 60 % 60, 2); buffer.append(UInt8(ascii: ":"))
        appendDigits(second % 60, 2); buffer.append(UInt8(ascii: " "))
        buffer.append(offset < 0 ? UInt8(ascii: "-") : UInt8(ascii: "+"))
        appendDigits(abs(offset) / 60, 2)
        appendDigits(abs(offset) % 60, 2)
    }

    private mutating func appendDigits(_ value: Int, _ width: Int) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var v = value
        while divisor > 0 {
            buffer.append(UInt8(ascii: "0") + UInt8(v / divisor % 10))
            v %= divisor
            divisor /= 10
        }
    }

    private mutating func randomUUIDText() -> String {
        let high = random.next(), low = random.next()
        let text = String(high, radix: 16, uppercase: true).leftPadded(16) + String(low, radix: 16, uppercase: true).leftPadded(16)
        let c = Array(text)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    private func pad(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }

    /// `value / 10^digits` as text, e.g. decimal(12345, 3) = "12.345".
    private func decimal(_ value: UInt64, _ digits: Int) -> String {
        var scale: UInt64 = 1
        for _ in 0..<digits { scale *= 10 }
        let fraction = String(value % scale)
        return "\(value / scale)." + String(repeating: "0", count: digits - fraction.count) + fraction
    }

    private func signedDecimal(_ value: Int, _ digits: Int) -> String {
        (value < 0 ? "-" : "") + decimal(UInt64(abs(value)), digits)
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
