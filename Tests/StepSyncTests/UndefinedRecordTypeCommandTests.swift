import Foundation
import Testing
@testable import StepLog

/// #18.2 from the command line: a record of a type the format does not
/// define (good checksum) at the end of the newest segment made `stepsync
/// status`, `export` and `today` die with SIGILL. Every command that opens
/// the store must exit 1 with the one-line corruption error instead.
@Suite(.serialized) struct UndefinedRecordTypeCommandTests {
    let stepsync = builtProduct("stepsync")

    /// A record of any type code with a good masked checksum.
    static func record(type: UInt8, _ payload: [UInt8] = []) -> [UInt8] {
        var crc = CRC32C.checksum([type])
        crc = payload.withUnsafeBytes { CRC32C.extend(crc, $0) }
        return withUnsafeBytes(of: UInt32(payload.count).littleEndian, Array.init) + [type]
            + withUnsafeBytes(of: CRC32C.mask(crc).littleEndian, Array.init) + payload
    }

    @Test func everyCommandExitsOneWithTheLineForEveryUndefinedType() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        do {
            let s = try StepLogStore.open(store)
            try s.upsert((0..<20).map { n in
                StepSample(id: UUIDBytes(high: 0x1000, low: 0x8000_0000_0000_0000 | n).uuid, startMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000,
                           endMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000 + 1_000, count: 10, sourceBundleId: "b", sourceDeviceName: nil)
            }, fetchedAt: Date())
            try s.close()
        }
        let segment = store + "/000000000001.log"
        let original = readFile(segment)
        let commands: [[String]] = [["status", "--store", store], ["export", "--store", store], ["today", "--store", store, "--now", "2026-11-21T12:00:00Z"]]
        var runs = 0
        for code in [UInt8(0)] + Array(UInt8(14)...UInt8(255)) {
            writeFile(segment, original + Self.record(type: code))
            // Every code with `status`; each command with a spread of codes
            // (a process each: the whole cross product would take minutes).
            let picked = code % 16 == 0 || code == 14 || code == 255 ? commands : [commands[0]]
            for command in picked {
                let r = try runProgram(stepsync, command, mergeStandardError: true)
                #expect(r.code == 1, "\(command[0]) with type \(code): exit \(r.code)")
                // One line: the damage, then what to do about it (CommandLineTests).
                #expect(r.lines.count == 1 && r.lines[0].hasPrefix("stepsync \(command[0]): corruption in \(segment) at offset \(original.count): unknown record type \(code). The store is damaged: 'steplog recover \(store)'"),
                        "\(command[0]) with type \(code): \(r.lines)")
                runs += 1
            }
        }
        #expect(runs == 243 + 2 * 18)
        #expect(readFile(segment).count == original.count + 9, "nothing was truncated or written")
    }
}
