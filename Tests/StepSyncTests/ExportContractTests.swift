import Foundation
import StepLog
import Testing
@testable import StepSync

/// The one sample contract: the shared vectors (also checked by the
/// server's tests), the import skipping and reporting records outside it,
/// and timestamps formatted right for every year.
@Suite struct ExportContractTests {
    static let vectorsPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/contract/samples.json").standardized.path

    /// A vector's sample through the wire check: the JSON types first (what
    /// a JSON decoder refuses; Swift's types make these states
    /// unrepresentable on the client), then `SampleContract`.
    static func violation(of sample: [String: ContractJSON], now: SampleContract.Instant) -> SampleContract.Field? {
        /// The field's text; nil when absent, not a string, or not UTF-8.
        func string(_ field: SampleContract.Field) -> String? {
            guard case .string(let text?)? = sample[field.rawValue] else { return nil }
            return text
        }
        guard let id = string(.id) else { return .id }
        guard let start = string(.startDate) else { return .startDate }
        guard let end = string(.endDate) else { return .endDate }
        // A JSON number, read as the nearest double as JSON parsers do; at most three decimals.
        guard case .number(let literal)? = sample["count"], let value = Double(literal) else { return .count }
        let count = SampleContract.thousandths(ofCount: value)
        guard let bundle = string(.sourceBundleId) else { return .sourceBundleId }
        var device: String?
        switch sample["sourceDeviceName"] {
        case nil, .null?: device = nil
        case .string(let text?)?: device = text
        default: return .sourceDeviceName
        }
        return SampleContract.check(id: id, startDate: start, endDate: end, countThousandths: count, sourceBundleId: bundle,
                                    sourceDeviceName: device, now: now)?.field
    }

    @Test func sharedVectors() throws {
        let document = try ContractJSON.parse(readFile(Self.vectorsPath))
        guard case .object(let top) = document, case .string(let nowText?)? = top["now"],
              case .array(let valid)? = top["valid"], case .array(let invalid)? = top["invalid"],
              case .object(let rules)? = top["rules"] else {
            Issue.record("unexpected shape of \(Self.vectorsPath)")
            return
        }
        let now = try #require(SampleContract.parseTimestamp(nowText))
        // The numbers in the file are the numbers in the code.
        #expect(rules["idMaxCharacters"] == .number(String(SampleContract.idMaxCharacters)))
        #expect(rules["countMax"] == .number(String(SampleContract.maxCount)))
        #expect(rules["maxFractionDigits"] == .number(String(SampleContract.maxFractionDigits)))
        #expect(rules["endDateAfterNowAtMostSeconds"] == .number(String(SampleContract.futureToleranceMilliseconds / 1000)))
        #expect(rules["durationAtMostSeconds"] == .number(String(SampleContract.maxDurationMilliseconds / 1000)))
        #expect(rules["earliestStartDate"] == .string(ISO8601.format(milliseconds: SampleContract.earliestStartMilliseconds)))
        #expect(rules["sourceBundleIdBytes"] == .array([.number("1"), .number(String(SampleContract.maxSourceBundleIdBytes))]))
        #expect(rules["sourceDeviceNameBytes"] == .array([.number("0"), .number(String(SampleContract.maxSourceDeviceNameBytes))]))
        #expect(valid.count >= 20 && invalid.count >= 50)
        for case .object(let vector) in valid {
            guard case .object(let sample)? = vector["sample"] else { continue }
            let found = Self.violation(of: sample, now: now)
            #expect(found == nil, "valid vector \(String(describing: vector["name"])) refused on \(String(describing: found))")
        }
        var fields = Set<SampleContract.Field>()
        for case .object(let vector) in invalid {
            guard case .object(let sample)? = vector["sample"], case .string(let fieldName?)? = vector["field"],
                  let field = SampleContract.Field(rawValue: fieldName) else {
                Issue.record("malformed invalid vector \(vector)")
                continue
            }
            fields.insert(field)
            #expect(Self.violation(of: sample, now: now) == field, "invalid vector \(String(describing: vector["name"]))")
        }
        #expect(fields == Set(SampleContract.Field.allCases))
    }

    /// The client side of the same rules, on `StepSample`s (what an import
    /// checks), at the edges.
    @Test func clientCheckMatchesTheWireCheck() {
        let now: Int64 = 1_795_348_800_000                       // 2026-11-22T12:00:00Z
        let id = UUID(uuidString: "5D9C3E8A-1F2B-8C4D-9E6F-0A1B2C3D4E5F")!
        func sample(_ start: Int64, _ end: Int64, count: Int = 1, bundle: String = "b", device: String? = nil) -> StepSample {
            StepSample(id: id, startMilliseconds: start, endMilliseconds: end, count: count, sourceBundleId: bundle, sourceDeviceName: device)
        }
        let hour: Int64 = 3_600_000
        let cases: [(StepSample, SampleContract.Field?)] = [
            (sample(now - hour, now), nil),
            (sample(SampleContract.earliestStartMilliseconds, SampleContract.earliestStartMilliseconds), nil),
            (sample(SampleContract.earliestStartMilliseconds - 1, SampleContract.earliestStartMilliseconds), .startDate),
            (sample(now, now + 24 * hour), nil),
            (sample(now, now + 24 * hour + 1), .endDate),
            (sample(now - 48 * hour, now), nil),
            (sample(now - 48 * hour - 1, now), .endDate),
            (sample(now, now - 1), .endDate),
            (sample(now - hour, now, count: 1_000_000), nil),
            (sample(now - hour, now, count: 1_000_001), .count),
            (sample(now - hour, now, bundle: ""), .sourceBundleId),
            (sample(now - hour, now, bundle: String(repeating: "€", count: 171)), .sourceBundleId),
            (sample(now - hour, now, device: String(repeating: "é", count: 256)), nil),
            (sample(now - hour, now, device: "a\u{0}"), .sourceDeviceName),
        ]
        for (sample, field) in cases {
            #expect(SampleContract.check(sample, nowMilliseconds: now)?.field == field, "\(sample)")
            let wire = SampleContract.check(id: sample.id.uuidString, startDate: ISO8601.format(milliseconds: sample.startMilliseconds),
                                            endDate: ISO8601.format(milliseconds: sample.endMilliseconds), countThousandths: sample.countThousandths,
                                            sourceBundleId: sample.sourceBundleId, sourceDeviceName: sample.sourceDeviceName,
                                            now: SampleContract.Instant(milliseconds: now))
            #expect(wire?.field == field, "\(sample) on the wire")
        }
        // Year 10000 and beyond is impossible by contract (and not RFC 3339 on the wire).
        let far = sample(253_402_300_800_000, 253_402_300_800_000)
        #expect(SampleContract.check(far, nowMilliseconds: now)?.field == .endDate)
        #expect(SampleContract.check(id: id.uuidString, startDate: ISO8601.format(milliseconds: far.startMilliseconds),
                                     endDate: ISO8601.format(milliseconds: far.endMilliseconds), countThousandths: 1000, sourceBundleId: "b",
                                     sourceDeviceName: nil, now: SampleContract.Instant(milliseconds: now)) != nil)
    }

    /// Years ≥ 10000 printed as 0000 (the year's last four digits); every
    /// Int64 of milliseconds now formats to text that parses back to it.
    @Test func timestampsAreRightForEveryYear() {
        #expect(ISO8601.format(milliseconds: 253_402_300_799_999) == "9999-12-31T23:59:59.999Z")
        #expect(ISO8601.format(milliseconds: 253_402_300_800_000) == "+010000-01-01T00:00:00Z")
        #expect(ISO8601.format(milliseconds: 0) == "1970-01-01T00:00:00Z")
        #expect(ISO8601.format(milliseconds: -62_167_219_200_000) == "0000-01-01T00:00:00Z")
        #expect(ISO8601.format(milliseconds: -62_167_219_200_001) == "-000001-12-31T23:59:59.999Z")
        #expect(ISO8601.format(milliseconds: Int64.max) == "+292278994-08-17T07:12:55.807Z")
        #expect(ISO8601.format(milliseconds: Int64.min) == "-292275055-05-16T16:47:04.192Z")
        var random = SplitMix64(seed: 21)
        var values: [Int64] = [Int64.max, Int64.min, 0, -1, 253_402_300_800_000, -62_167_219_200_001]
        for _ in 0..<5_000 { values.append(Int64(bitPattern: random.next()) >> Int64(random.next() % 40)) }
        for value in values {
            let text = ISO8601.format(milliseconds: value)
            #expect(ISO8601.parse(text) == value, "\(value) → \(text)")
        }
        #expect(ISO8601.parse("+10000-01-01T00:00:00Z") == nil)      // expanded years have six digits or more
        #expect(ISO8601.parse("+999999999-01-01T00:00:00Z") == nil)  // beyond Int64 milliseconds
    }

    /// Records the server would refuse are skipped and reported (count,
    /// first lines, `--json`), never stored; everything else is stored.
    @Test func outOfContractRecordsAreSkippedReportedAndTheRestStored() throws {
        let dir = TemporaryDirectory("steplog-export")
        let tmp = TemporaryDirectory()
        var good = (0..<6).map { ExportTestRecord.step(minute: $0 * 10, count: 100 + $0) }
        good[5].sourceName = String(repeating: "s", count: 512)
        func out(_ minute: Int, _ change: (inout ExportTestRecord) -> Void) -> ExportTestRecord {
            var record = ExportTestRecord.step(minute: minute, count: 1)
            change(&record)
            return record
        }
        var bad: [(ExportTestRecord, SampleContract.Field)] = [
            (out(1) { $0.startDate = "1999-12-31 15:59:59 -0800"; $0.endDate = "1999-12-31 16:30:00 -0800" }, .startDate),
            (out(2) { $0.endDate = "2021-02-28 09:00:00 -0800" }, .endDate),                        // before its start
            (out(3) { $0.endDate = "2021-03-05 09:00:00 -0800" }, .endDate),                        // 4 days long
            (out(4) { $0.startDate = "9999-12-31 23:00:00 -0800"; $0.endDate = "9999-12-31 23:30:00 -0800" }, .endDate),  // year 10000 in UTC
            (out(5) { $0.value = "1000001" }, .count),
            (out(6) { $0.sourceName = "" }, .sourceBundleId),
            (out(7) { $0.sourceName = String(repeating: "s", count: 513) }, .sourceBundleId),
            (out(8) { $0.device = "<<HKDevice: 0x1>, name:\(String(repeating: "w", count: 600)), model:Watch>" }, .sourceDeviceName),
        ]
        for i in bad.indices { bad[i].0.sourceVersion = "bad-\(i)" }     // to find their lines
        let body = zip(good.prefix(4), bad.prefix(4)).flatMap { [$0.xml, $1.0.xml] } + bad.dropFirst(4).map(\.0.xml) + good.suffix(2).map(\.xml)
        let text = ExportTestDocument.xml(body)
        let path = try dir.write("contract.xml", text)

        let provider = try AppleHealthExportProvider(path: path)
        #expect(Set(provider.allSamples().map(\.id)) == Set(good.map(\.expectedID)))
        #expect(provider.summary.outOfContractStepRecords == bad.count)
        #expect(provider.summary.malformedStepRecords == 0)
        let lines = text.components(separatedBy: "\n")
        let badLines = bad.indices.map { i in lines.firstIndex { $0.contains("sourceVersion=\"bad-\(i)\"") }! + 1 }
        #expect(provider.summary.outOfContractExamples.map(\.line) == Array(badLines.prefix(5)))
        #expect(provider.summary.outOfContractExamples.map(\.field) == bad.prefix(5).map(\.1))
        #expect(provider.summary.outOfContractExamples.first?.reason == "startDate 1999-12-31T23:59:59Z is before 2000-01-01T00:00:00Z")
        // The contract is checked against the importer's clock: in 2020, these 2021 samples are in the future.
        let early = try AppleHealthExportProvider(path: path, now: Date(timeIntervalSince1970: 1_600_000_000))
        #expect(early.sampleCount == 0 && early.summary.outOfContractStepRecords == good.count + bad.count)

        // Through the command: reported on stderr and in --json, the rest stored.
        let stepsync = builtProduct("stepsync")
        let store = tmp.sub("store")
        let run = try runProgram(stepsync, ["ingest", "--store", store, "--source", path, "--json"])
        #expect(run.code == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.lines.joined().utf8)) as? [String: Any])
        let read = try #require(json["read"] as? [String: Any])
        let skipped = try #require(read["outOfContract"] as? [String: Any])
        #expect(skipped["count"] as? Int == bad.count)
        let examples = try #require(skipped["examples"] as? [[String: Any]])
        #expect(examples.compactMap { $0["line"] as? Int } == Array(badLines.prefix(5)))
        #expect(examples.compactMap { $0["field"] as? String } == bad.prefix(5).map(\.1.rawValue))
        #expect(json["samples"] as? Int == good.count)
        let exported = try runProgram(stepsync, ["export", "--store", store]).lines
        #expect(Set(exported.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
        }) == Set(good.map(\.expectedID.uuidString)))
        let stderr = try runProgram(stepsync, ["ingest", "--store", tmp.sub("other"), "--source", path], mergeStandardError: true).lines
        #expect(stderr.contains { $0.contains("8 outside the sample contract skipped") })
        #expect(stderr.contains("  skipped (outside the sample contract): line \(badLines[0]): startDate 1999-12-31T23:59:59Z is before 2000-01-01T00:00:00Z"))
    }
}

/// Just enough JSON for the vectors file: numbers keep their literal text
/// (1.0 and 1e3 are not integers), strings with a lone surrogate (not
/// UTF-8) are `.string(nil)`.
enum ContractJSON: Equatable {
    case object([String: ContractJSON])
    case array([ContractJSON])
    case string(String?)
    case number(String)
    case bool(Bool)
    case null

    struct ParseError: Error, CustomStringConvertible {
        var offset: Int
        var description: String { "JSON error at byte \(offset)" }
    }

    static func parse(_ bytes: [UInt8]) throws -> ContractJSON {
        var i = 0
        let value = try parseValue(bytes, &i)
        skipSpace(bytes, &i)
        guard i == bytes.count else { throw ParseError(offset: i) }
        return value
    }

    private static func skipSpace(_ b: [UInt8], _ i: inout Int) {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    private static func parseValue(_ b: [UInt8], _ i: inout Int) throws -> ContractJSON {
        skipSpace(b, &i)
        guard i < b.count else { throw ParseError(offset: i) }
        switch b[i] {
        case UInt8(ascii: "{"):
            i += 1
            var object: [String: ContractJSON] = [:]
            skipSpace(b, &i)
            if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
            while true {
                skipSpace(b, &i)
                guard case .string(let key?) = try parseValue(b, &i) else { throw ParseError(offset: i) }
                skipSpace(b, &i)
                guard i < b.count, b[i] == UInt8(ascii: ":") else { throw ParseError(offset: i) }
                i += 1
                guard object.updateValue(try parseValue(b, &i), forKey: key) == nil else { throw ParseError(offset: i) }
                skipSpace(b, &i)
                guard i < b.count else { throw ParseError(offset: i) }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
                guard b[i] == UInt8(ascii: ",") else { throw ParseError(offset: i) }
                i += 1
            }
        case UInt8(ascii: "["):
            i += 1
            var array: [ContractJSON] = []
            skipSpace(b, &i)
            if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
            while true {
                array.append(try parseValue(b, &i))
                skipSpace(b, &i)
                guard i < b.count else { throw ParseError(offset: i) }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
                guard b[i] == UInt8(ascii: ",") else { throw ParseError(offset: i) }
                i += 1
            }
        case UInt8(ascii: "\""):
            return .string(try parseString(b, &i))
        case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
            for (word, value) in [("true", ContractJSON.bool(true)), ("false", .bool(false)), ("null", .null)]
            where b[i...].starts(with: word.utf8) {
                i += word.utf8.count
                return value
            }
            throw ParseError(offset: i)
        default:
            let start = i
            while i < b.count, b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: ".")
                || b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") || (b[i] >= UInt8(ascii: "0") && b[i] <= UInt8(ascii: "9")) {
                i += 1
            }
            guard i > start else { throw ParseError(offset: i) }
            return .number(String(decoding: b[start..<i], as: UTF8.self))
        }
    }

    /// A string literal from its opening quote; nil when it holds a lone surrogate.
    private static func parseString(_ b: [UInt8], _ i: inout Int) throws -> String? {
        i += 1
        var units: [UInt16] = []
        var raw: [UInt8] = []
        func flushRaw() {
            units += Array(String(decoding: raw, as: UTF8.self).utf16)
            raw.removeAll()
        }
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                flushRaw()
                var scalars = String.UnicodeScalarView()
                var iterator = units.makeIterator()
                var decoder = UTF16()
                while true {
                    switch decoder.decode(&iterator) {
                    case .scalarValue(let scalar): scalars.append(scalar)
                    case .emptyInput: return String(scalars)
                    case .error: return nil
                    }
                }
            }
            if c == UInt8(ascii: "\\") {
                flushRaw()
                guard i + 1 < b.count else { throw ParseError(offset: i) }
                let e = b[i + 1]
                i += 2
                switch e {
                case UInt8(ascii: "n"): units.append(0x0A)
                case UInt8(ascii: "t"): units.append(0x09)
                case UInt8(ascii: "r"): units.append(0x0D)
                case UInt8(ascii: "b"): units.append(0x08)
                case UInt8(ascii: "f"): units.append(0x0C)
                case UInt8(ascii: "u"):
                    guard i + 4 <= b.count, let unit = UInt16(String(decoding: b[i..<(i + 4)], as: UTF8.self), radix: 16) else {
                        throw ParseError(offset: i)
                    }
                    units.append(unit)
                    i += 4
                default: units.append(UInt16(e))
                }
                continue
            }
            raw.append(c)
            i += 1
        }
        throw ParseError(offset: i)
    }
}
