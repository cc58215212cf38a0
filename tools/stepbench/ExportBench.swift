import CZlib
import Foundation
import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `stepbench export …`: the Apple Health export benchmark.
///
/// - `generate --out PATH.zip --size-mb N [--seed S] [--entry NAME] [--zip64]`
///   writes a realistic export.zip holding at least N MB (10^6 bytes) of XML:
///   the inline DTD, ExportDate, Me, and day after day of interleaved records
///   (StepCount from an iPhone and an Apple Watch with overlapping times,
///   HeartRate with MetadataEntry children, active/basal energy, distance,
///   flights, stand time), BloodPressure Correlations whose Records are also
///   printed at top level, Workouts with events and a WorkoutRoute of
///   Locations, and an ActivitySummary per day; plus the side files a real
///   zip holds (export_cda.xml, a workout route, an ECG). Raw deflate through
///   the system zlib, ZIP64 records when the sizes need them (or `--zip64`).
/// - `import PATH` reads the file with `AppleHealthExportProvider` and prints
///   XML MB/s, input MB/s, step records, seconds and peak RSS (VmHWM).
enum ExportBench {
    static let usage = """
        usage: stepbench export generate --out PATH.zip --size-mb N [--seed S] [--entry NAME] [--zip64] [--no-dtd]
               stepbench export import PATH
        """

    static func run(arguments: [String]) throws {
        guard let command = arguments.first else { throw ExportBenchUsageError(usage) }
        let options = Array(arguments.dropFirst())
        switch command {
        case "generate":
            var out: String?
            var sizeMB: Int?
            var seed: UInt64 = 1
            var entry = "apple_health_export/export.xml"
            var zip64 = false
            var dtd = true
            var i = 0
            func value() throws -> String {
                i += 1
                guard i < options.count else { throw ExportBenchUsageError("\(options[i - 1]) needs a value\n\(usage)") }
                return options[i]
            }
            while i < options.count {
                switch options[i] {
                case "--out": out = try value()
                case "--size-mb":
                    let text = try value()
                    guard let n = Int(text), n > 0 else { throw ExportBenchUsageError("--size-mb must be a positive whole number, found '\(text)'") }
                    sizeMB = n
                case "--seed":
                    let text = try value()
                    guard let n = UInt64(text) else { throw ExportBenchUsageError("--seed must be a non-negative whole number, found '\(text)'") }
                    seed = n
                case "--entry": entry = try value()
                case "--zip64": zip64 = true
                case "--no-dtd": dtd = false
                default: throw ExportBenchUsageError("unknown option \(options[i])\n\(usage)")
                }
                i += 1
            }
            guard let out, let sizeMB else { throw ExportBenchUsageError("generate needs --out and --size-mb\n\(usage)") }
            try generate(out: out, xmlBytes: Int64(sizeMB) * 1_000_000, seed: seed, entryName: entry, forceZip64: zip64, dtd: dtd)
        case "import":
            guard options.count == 1 else { throw ExportBenchUsageError(usage) }
            try importExport(options[0])
        default:
            throw ExportBenchUsageError("unknown export command \(command)\n\(usage)")
        }
    }

    // MARK: - import

    static func importExport(_ path: String) throws {
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value ?? 0
        log("export import \(path) (\(fmt(Double(size) / 1e6, 1)) MB)")
        let started = DispatchTime.now().uptimeNanoseconds
        let (provider, seconds) = try measure {
            try AppleHealthExportProvider(path: path) { progress in
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
                let fraction = progress.totalBytes > 0 ? Double(progress.bytesRead) / Double(progress.totalBytes) : 0
                let eta = fraction > 0 ? elapsed / fraction - elapsed : 0
                log(String(format: "  %.0f/%.0f MB read, %.0f MB XML (%.0f MB/s), %d step records, ETA %.0fs",
                           Double(progress.bytesRead) / 1e6, Double(progress.totalBytes) / 1e6,
                           Double(progress.xmlBytes) / 1e6, Double(progress.xmlBytes) / 1e6 / max(elapsed, 1e-9),
                           progress.stepRecordsKept, eta))
            }
        }
        let summary = provider.summary
        let peak = residentMemory().peak
        print("export import \(path): \(summary.input)")
        print("  XML:           \(fmt(Double(summary.xmlBytes) / 1e6, 1)) MB at \(fmt(Double(summary.xmlBytes) / 1e6 / seconds, 1)) MB/s")
        print("  input:         \(fmt(Double(summary.bytesRead) / 1e6, 1)) MB at \(fmt(Double(summary.bytesRead) / 1e6 / seconds, 1)) MB/s")
        print("  step records:  \(summary.recordsKept) kept, \(summary.duplicatesCollapsed) duplicates collapsed, "
              + "\(summary.nestedStepRecordsSkipped) nested in correlations, \(summary.malformedStepRecords) malformed")
        print("  seconds:       \(fmt(seconds, 3))")
        print("  peak RSS:      \(mib(peak)) (VmHWM)")
        print("  sourceIdentity \(provider.sourceIdentity)")
    }

    // MARK: - generate

    /// `dtd: false` leaves out the (malformed iOS 16) DOCTYPE: strict XML
    /// parsers, such as the healthkit-to-sqlite peer's, stop at that DTD.
    static func generate(out: String, xmlBytes target: Int64, seed: UInt64, entryName: String, forceZip64: Bool, dtd: Bool = true) throws {
        log("export generate \(out): at least \(target / 1_000_000) MB of XML in '\(entryName)', seed \(seed)")
        let (_, seconds) = try measure {
            let zip = try ExportBenchZipWriter(path: out)
            // The exported XML comes first, as in Apple's zips; ZIP64 fields
            // when the sizes could pass 4 GiB (the target plus a day of slack).
            let mayNeedZip64 = forceZip64 || target + (64 << 20) >= Int64(UInt32.max)
            let deflater = try zip.beginEntry(name: entryName, zip64: mayNeedZip64)
            var writer = ExportBenchXMLWriter(seed: seed, output: deflater)
            writer.includeDTD = dtd
            try writer.writeExport(atLeast: target)
            try zip.finishEntry(deflater, forceZip64: forceZip64)
            for (name, text) in ExportBenchXMLWriter.sideFiles() {
                let side = try zip.beginEntry(name: name, zip64: forceZip64)
                try side.write(Array(text.utf8))
                try zip.finishEntry(side, forceZip64: forceZip64)
            }
            try zip.close(forceZip64: forceZip64)
            log("  \(fmt(Double(writer.bytesWritten) / 1e6, 1)) MB of XML, \(writer.stepRecords) step records, "
                + "\(writer.days) days")
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? NSNumber)?.int64Value ?? 0
        log("  wrote \(fmt(Double(size) / 1e6, 1)) MB zip in \(fmt(seconds, 1)) s")
    }

    fileprivate static func log(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

/// A usage mistake: the message to print (the caller exits non-zero).
struct ExportBenchUsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

// MARK: - XML generation

/// Writes a synthetic but realistic export.xml, day by day.
private struct ExportBenchXMLWriter {
    private var random: SplitMix64
    private let output: ExportBenchDeflater
    private var buffer: [UInt8] = []
    private(set) var bytesWritten: Int64 = 0
    private(set) var stepRecords = 0
    private(set) var days = 0

    init(seed: UInt64, output: ExportBenchDeflater) {
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
    var includeDTD = true

    mutating func writeExport(atLeast target: Int64) throws {
        append(includeDTD ? Self.header : Self.headerWithoutDTD)
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
        try output.write(buffer)
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
                writeQuantity("HKQuantityTypeIdentifierStepCount", Self.watchSource, "8.5", watch, "count",
                              start: t, end: t + length, offset: offset, value: String(steps))
                writeQuantity("HKQuantityTypeIdentifierDistanceWalkingRunning", Self.watchSource, "8.5", watch, "km",
                              start: t, end: t + length, offset: offset, value: decimal(UInt64(steps) * 7, 4))
                stepRecords += 1
            }
            // iPhone: fewer, longer step samples overlapping the Watch's.
            if minute % 20 < 4 {
                let length = Int64(60_000 * (5 + random.next() % 10))
                writeQuantity("HKQuantityTypeIdentifierStepCount", Self.iPhoneSource, "15.4.1", iPhone, "count",
                              start: t - 60_000, end: t + length, offset: offset, value: String(50 + Int(random.next() % 900)))
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

    /// `header` without the DOCTYPE block.
    static var headerWithoutDTD: String {
        guard let start = header.range(of: "<!DOCTYPE"), let end = header.range(of: "]>\n", range: start.upperBound..<header.endIndex) else { return header }
        return String(header[..<start.lowerBound]) + String(header[end.upperBound...])
    }

    /// The declaration, the iOS 16 inline DTD (malformed as Apple shipped it:
    /// the VisionPrescription/RightEye/LeftEye ATTLISTs are never closed),
    /// ExportDate and Me.
    static let header = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE HealthData [
        <!-- HealthKit Export Version: 12 -->
        <!ELEMENT HealthData (ExportDate,Me,(Record|Correlation|Workout|ActivitySummary|ClinicalRecord|Audiogram|VisionPrescription)*)>
        <!ATTLIST HealthData
          locale CDATA #REQUIRED
        >
        <!ELEMENT ExportDate EMPTY>
        <!ATTLIST ExportDate
          value CDATA #REQUIRED
        >
        <!ELEMENT Me EMPTY>
        <!ATTLIST Me
          HKCharacteristicTypeIdentifierDateOfBirth         CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBiologicalSex       CDATA #REQUIRED
          HKCharacteristicTypeIdentifierBloodType           CDATA #REQUIRED
          HKCharacteristicTypeIdentifierFitzpatrickSkinType CDATA #REQUIRED
          HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse CDATA #REQUIRED
        >
        <!ELEMENT Record ((MetadataEntry|HeartRateVariabilityMetadataList)*)>
        <!ATTLIST Record
          type          CDATA #REQUIRED
          unit          CDATA #IMPLIED
          value         CDATA #IMPLIED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!-- Note: Any Records that appear as children of a correlation also appear as top-level records in this document. -->
        <!ELEMENT Correlation ((MetadataEntry|Record)*)>
        <!ATTLIST Correlation
          type          CDATA #REQUIRED
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT Workout ((MetadataEntry|WorkoutEvent|WorkoutRoute|WorkoutStatistics)*)>
        <!ATTLIST Workout
          workoutActivityType   CDATA #REQUIRED
          duration              CDATA #IMPLIED
          durationUnit          CDATA #IMPLIED
          sourceName            CDATA #REQUIRED
          sourceVersion         CDATA #IMPLIED
          device                CDATA #IMPLIED
          creationDate          CDATA #IMPLIED
          startDate             CDATA #REQUIRED
          endDate               CDATA #REQUIRED
        >
        <!ELEMENT WorkoutRoute ((MetadataEntry|FileReference|Location)*)>
        <!ATTLIST WorkoutRoute
          sourceName    CDATA #REQUIRED
          sourceVersion CDATA #IMPLIED
          device        CDATA #IMPLIED
          creationDate  CDATA #IMPLIED
          startDate     CDATA #REQUIRED
          endDate       CDATA #REQUIRED
        >
        <!ELEMENT ActivitySummary EMPTY>
        <!ATTLIST ActivitySummary
          dateComponents           CDATA #IMPLIED
          activeEnergyBurned       CDATA #IMPLIED
          activeEnergyBurnedGoal   CDATA #IMPLIED
          activeEnergyBurnedUnit   CDATA #IMPLIED
        >
        <!ELEMENT MetadataEntry EMPTY>
        <!ATTLIST MetadataEntry
          key   CDATA #REQUIRED
          value CDATA #REQUIRED
        >
        <!ELEMENT VisionPrescription ((RightEye|LeftEye|Attachment|MetadataEntry)*)>
        <!ATTLIST VisionPrescription
          type             CDATA #REQUIRED
          dateIssued       CDATA #REQUIRED
          expirationDate   CDATA #IMPLIED
          brand            CDATA #IMPLIED
        <!ELEMENT RightEye EMPTY>
        <!ATTLIST RightEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
          cylinder          CDATA #IMPLIED
          axis              CDATA #IMPLIED
        <!ELEMENT LeftEye EMPTY>
        <!ATTLIST LeftEye
          sphere            CDATA #IMPLIED
          sphereUnit        CDATA #IMPLIED
          cylinder          CDATA #IMPLIED
          axis              CDATA #IMPLIED
        <!ELEMENT Attachment EMPTY>
        <!ATTLIST Attachment
          identifier        CDATA #IMPLIED
        >
        ]>
        <HealthData locale="en_US">
         <ExportDate value="2024-06-30 21:14:05 -0700"/>
         <Me HKCharacteristicTypeIdentifierDateOfBirth="1985-04-12" HKCharacteristicTypeIdentifierBiologicalSex="HKBiologicalSexFemale" HKCharacteristicTypeIdentifierBloodType="HKBloodTypeNotSet" HKCharacteristicTypeIdentifierFitzpatrickSkinType="HKFitzpatrickSkinTypeNotSet" HKCharacteristicTypeIdentifierCardioFitnessMedicationsUse="None"/>

        """

    /// The other files of a real export.zip (small, for the directory's sake).
    static func sideFiles() -> [(String, String)] {
        [("apple_health_export/export_cda.xml",
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ClinicalDocument xmlns=\"urn:hl7-org:v3\">\n <title>Health Data Export</title>\n</ClinicalDocument>\n"),
         ("apple_health_export/workout-routes/route_2019-07-14_6.31pm.gpx",
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<gpx version=\"1.1\" creator=\"Apple Health Export\"><trk><trkseg><trkpt lon=\"-122.4\" lat=\"37.7\"><ele>21.2</ele><time>2019-07-14T18:31:00Z</time></trkpt></trkseg></trk></gpx>\n"),
         ("apple_health_export/electrocardiograms/ecg_2020-02-11.csv",
          "Name,Jane\nRecorded Date,2020-02-11 08:15:02 -0800\nClassification,Sinus Rhythm\n\n-12.5\n-11.9\n")]
    }
}

// MARK: - Zip writing

/// One entry being written: raw deflate (zlib `deflateInit2_`, windowBits
/// -15) straight into the zip file, with its CRC-32 and sizes counted.
private final class ExportBenchDeflater {
    let name: String
    let headerOffset: Int64
    let zip64: Bool
    private let file: ExportBenchOutputFile
    private let stream: UnsafeMutablePointer<z_stream>
    private let out: UnsafeMutablePointer<UInt8>
    private static let outCapacity = 1 << 20
    private(set) var crc: UInt = CZlib.crc32(0, nil, 0)
    private(set) var uncompressed: Int64 = 0
    private(set) var compressed: Int64 = 0

    init(name: String, headerOffset: Int64, zip64: Bool, file: ExportBenchOutputFile) throws {
        self.name = name
        self.headerOffset = headerOffset
        self.zip64 = zip64
        self.file = file
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        out = .allocate(capacity: Self.outCapacity)
        let status = deflateInit2_(stream, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                                   Int32(MemoryLayout<z_stream>.size))
        guard status == Z_OK else { throw ExportBenchUsageError("zlib deflateInit2_ failed (\(status))") }
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
        out.deallocate()
    }

    func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return }
            crc = CZlib.crc32(crc, base, UInt32(buffer.count))
            uncompressed += Int64(buffer.count)
            stream.pointee.next_in = UnsafeMutablePointer(mutating: base)
            stream.pointee.avail_in = UInt32(buffer.count)
            try pump(Z_NO_FLUSH)
        }
    }

    func finish() throws {
        stream.pointee.next_in = nil
        stream.pointee.avail_in = 0
        try pump(Z_FINISH)
    }

    private func pump(_ flush: Int32) throws {
        while true {
            stream.pointee.next_out = out
            stream.pointee.avail_out = UInt32(Self.outCapacity)
            let status = deflate(stream, flush)
            guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else {
                throw ExportBenchUsageError("zlib deflate failed (\(status))")
            }
            let produced = Self.outCapacity - Int(stream.pointee.avail_out)
            try file.append(out, count: produced)
            compressed += Int64(produced)
            if flush == Z_FINISH ? status == Z_STREAM_END : (stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0) {
                return
            }
        }
    }
}

/// A zip file written front to back; local headers are patched in place
/// with each entry's CRC and sizes once it is finished.
private final class ExportBenchZipWriter {
    private let file: ExportBenchOutputFile
    private var central: [UInt8] = []
    private var entries = 0
    private var anyZip64 = false

    init(path: String) throws {
        file = try ExportBenchOutputFile(path: path)
    }

    /// Writes the local header; with `zip64` it holds a ZIP64 extra field
    /// (sizes unknown yet, and possibly ≥ 4 GiB).
    func beginEntry(name: String, zip64: Bool) throws -> ExportBenchDeflater {
        let offset = file.size
        let nameBytes = Array(name.utf8)
        var header: [UInt8] = []
        header.le32(0x0403_4B50)
        header.le16(zip64 ? 45 : 20)               // version needed
        header.le16(0x0800)                         // UTF-8 names
        header.le16(8)                              // deflate
        header.le16(0x6000); header.le16(0x58C1)    // DOS time/date
        header.le32(0)                              // CRC, patched
        header.le32(zip64 ? 0xFFFF_FFFF : 0); header.le32(zip64 ? 0xFFFF_FFFF : 0)
        header.le16(UInt16(nameBytes.count))
        header.le16(zip64 ? 20 : 0)
        header += nameBytes
        if zip64 {
            header.le16(0x0001); header.le16(16)
            header.le64(0); header.le64(0)          // sizes, patched
        }
        try file.append(header)
        return try ExportBenchDeflater(name: name, headerOffset: offset, zip64: zip64, file: file)
    }

    func finishEntry(_ entry: ExportBenchDeflater, forceZip64: Bool) throws {
        try entry.finish()
        let crc = UInt32(truncatingIfNeeded: entry.crc)
        // Patch the local header.
        var patch: [UInt8] = []
        patch.le32(crc)
        if entry.zip64 {
            patch.le32(0xFFFF_FFFF); patch.le32(0xFFFF_FFFF)
        } else {
            guard entry.compressed < 0xFFFF_FFFF, entry.uncompressed < 0xFFFF_FFFF else {
                throw ExportBenchUsageError("entry \(entry.name) passed 4 GiB without ZIP64 fields")
            }
            patch.le32(UInt32(entry.compressed)); patch.le32(UInt32(entry.uncompressed))
        }
        try file.write(patch, at: entry.headerOffset + 14)
        if entry.zip64 {
            let nameLength = Int64(entry.name.utf8.count)
            var sizes: [UInt8] = []
            sizes.le64(UInt64(entry.uncompressed)); sizes.le64(UInt64(entry.compressed))
            try file.write(sizes, at: entry.headerOffset + 30 + nameLength + 4)
        }
        // Central-directory record; ZIP64 extra for the fields that need it.
        let needs = forceZip64 || entry.uncompressed >= 0xFFFF_FFFF || entry.compressed >= 0xFFFF_FFFF
            || entry.headerOffset >= 0xFFFF_FFFF
        var extra: [UInt8] = []
        if needs {
            anyZip64 = true
            extra.le16(0x0001); extra.le16(24)
            extra.le64(UInt64(entry.uncompressed)); extra.le64(UInt64(entry.compressed)); extra.le64(UInt64(entry.headerOffset))
        }
        let nameBytes = Array(entry.name.utf8)
        central.le32(0x0201_4B50)
        central.le16(0x031E)                        // made by: Unix, 3.0
        central.le16(needs ? 45 : 20)
        central.le16(0x0800)
        central.le16(8)
        central.le16(0x6000); central.le16(0x58C1)
        central.le32(crc)
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.compressed))
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.uncompressed))
        central.le16(UInt16(nameBytes.count))
        central.le16(UInt16(extra.count))
        central.le16(0); central.le16(0); central.le16(0)
        central.le32(0o100644 << 16)
        central.le32(needs ? 0xFFFF_FFFF : UInt32(entry.headerOffset))
        central += nameBytes
        central += extra
        entries += 1
    }

    func close(forceZip64: Bool) throws {
        let directoryOffset = file.size
        try file.append(central)
        let zip64 = forceZip64 || anyZip64 || directoryOffset >= 0xFFFF_FFFF
        var end: [UInt8] = []
        if zip64 {
            let zip64EndOffset = file.size
            end.le32(0x0606_4B50); end.le64(44)
            end.le16(0x031E); end.le16(45)
            end.le32(0); end.le32(0)
            end.le64(UInt64(entries)); end.le64(UInt64(entries))
            end.le64(UInt64(central.count)); end.le64(UInt64(directoryOffset))
            end.le32(0x0706_4B50); end.le32(0); end.le64(UInt64(zip64EndOffset)); end.le32(1)
        }
        end.le32(0x0605_4B50)
        end.le16(0); end.le16(0)
        end.le16(zip64 ? 0xFFFF : UInt16(entries)); end.le16(zip64 ? 0xFFFF : UInt16(entries))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(central.count))
        end.le32(zip64 ? 0xFFFF_FFFF : UInt32(directoryOffset))
        end.le16(0)
        try file.append(end)
        try file.close()
    }
}

/// The zip being written: write(2) at the end, pwrite(2) to patch headers.
private final class ExportBenchOutputFile {
    private var descriptor: Int32
    private(set) var size: Int64 = 0
    let path: String

    init(path: String) throws {
        self.path = path
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw ExportBenchUsageError("\(path): cannot create: \(String(cString: strerror(errno)))") }
    }

    deinit { if descriptor >= 0 { _ = Glibc_or_Darwin_close(descriptor) } }

    func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBufferPointer { try append($0.baseAddress!, count: $0.count) }
    }

    func append(_ base: UnsafePointer<UInt8>, count: Int) throws {
        var done = 0
        while done < count {
            let n = Glibc_or_Darwin_write(descriptor, base + done, count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw ExportBenchUsageError("\(path): write failed: \(String(cString: strerror(errno)))")
            }
            done += n
        }
        size += Int64(count)
    }

    func write(_ bytes: [UInt8], at offset: Int64) throws {
        let n = bytes.withUnsafeBufferPointer { pwrite(descriptor, $0.baseAddress!, $0.count, off_t(offset)) }
        guard n == bytes.count else { throw ExportBenchUsageError("\(path): pwrite failed: \(String(cString: strerror(errno)))") }
    }

    func close() throws {
        guard Glibc_or_Darwin_close(descriptor) == 0 else {
            throw ExportBenchUsageError("\(path): close failed: \(String(cString: strerror(errno)))")
        }
        descriptor = -1
    }
}

#if canImport(Glibc)
private func Glibc_or_Darwin_write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { Glibc.write(fd, buffer, count) }
private func Glibc_or_Darwin_close(_ fd: Int32) -> Int32 { Glibc.close(fd) }
#elseif canImport(Darwin)
private func Glibc_or_Darwin_write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int { Darwin.write(fd, buffer, count) }
private func Glibc_or_Darwin_close(_ fd: Int32) -> Int32 { Darwin.close(fd) }
#endif

private extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

private extension Array where Element == UInt8 {
    mutating func le16(_ value: UInt16) { append(UInt8(value & 0xFF)); append(UInt8(value >> 8)) }
    mutating func le32(_ value: UInt32) { le16(UInt16(value & 0xFFFF)); le16(UInt16(value >> 16)) }
    mutating func le64(_ value: UInt64) { le32(UInt32(value & 0xFFFF_FFFF)); le32(UInt32(value >> 32)) }
}
