import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// What the two command-line tools promise a person: `help COMMAND` is
/// `COMMAND --help`, `--version`, every command the README shows exists with
/// the options it uses, every option a `--help` lists is one the command
/// takes, and a store error says what to do next.
@Suite struct CommandLineTests {
    static let tools = ["stepsync": builtProduct("stepsync"), "steplog": builtProduct("steplog")]
    static let commands = ["stepsync": ["ingest", "upload", "status", "intervals", "export", "today", "daily", "forget"],
                           "steplog": ["verify", "stats", "dump", "recover", "compact"]]
    static let readme = String(decoding: readFile(URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../README.md").standardized.path), as: UTF8.self)

    func run(_ tool: String, _ arguments: [String]) throws -> (code: Int32, lines: [String]) {
        try runProgram(Self.tools[tool]!, arguments, mergeStandardError: true)
    }

    @Test func helpCommandIsCommandHelpAndEveryToolHasAVersion() throws {
        for (tool, commands) in Self.commands {
            let top = try run(tool, ["--help"])
            #expect(top.code == 0 && top.lines.first == "usage: \(tool) <command> \(tool == "steplog" ? "DIR " : "")[options]")
            #expect(try run(tool, ["help"]) == top)
            for command in commands {
                #expect(top.lines.contains { $0.hasPrefix("  \(command) ") }, "\(tool) --help lists \(command)")
                let help = try run(tool, [command, "--help"])
                #expect(help.code == 0 && help.lines.first?.hasPrefix("usage: \(tool) \(command)") == true)
                #expect(try run(tool, ["help", command]) == help, "\(tool) help \(command)")
            }
            let unknown = try run(tool, ["help", "frobnicate"])
            #expect(unknown.code == 2 && unknown.lines.first == "\(tool) help: unknown command 'frobnicate'")
            #expect(try run(tool, ["--version"]) == (0, ["\(tool) 1.0.0 (StepLog format 3)"]))
        }
        for tool in ["stepbench", "crashcheck"] {
            #expect(try runProgram(builtProduct(tool), ["--version"]) == (0, ["\(tool) 1.0.0 (StepLog format 3)"]))
        }
    }

    /// Every `$S …` (stepsync) and `$L …` (steplog) line of the README names a
    /// command whose --help lists each option the line uses.
    @Test func everyCommandTheReadmeShowsExistsWithItsOptions() throws {
        var checked = 0
        var inShell = false
        for line in Self.readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") { inShell = line == "```sh"; continue }
            guard inShell else { continue }
            let words = line.split(separator: "#", maxSplits: 1).first.map { $0.split(separator: " ").map(String.init) } ?? []
            guard let at = words.firstIndex(where: { $0 == "$S" || $0 == "$L" }), at + 1 < words.count else { continue }
            let tool = words[at] == "$S" ? "stepsync" : "steplog"
            let command = words[at + 1]
            #expect(Self.commands[tool]!.contains(command), "README: \(line)")
            let listed = Self.listedOptions(try run(tool, [command, "--help"]).lines)
            for option in words[(at + 2)...] where option.hasPrefix("--") {
                let name = String(option.prefix { $0 != "=" })
                #expect(listed.contains(name), "README uses \(tool) \(command) \(name), which its --help does not list: \(line)")
            }
            checked += 1
        }
        #expect(checked >= 20, "README commands found: \(checked)")
        for (tool, commands) in Self.commands {
            for command in commands {
                let shown = Self.readme.contains(tool == "stepsync" ? "$S \(command)" : "$L \(command)")
                #expect(shown, "the README shows \(tool) \(command)")
            }
        }
    }

    /// Each option a command's --help lists is one its parser knows (given
    /// alone it may lack a value or a store, never be unknown).
    @Test func everyOptionEachHelpListsIsTaken() throws {
        for (tool, commands) in Self.commands {
            for command in commands {
                for option in Self.listedOptions(try run(tool, [command, "--help"]).lines) where option != "--help" {
                    let r = try run(tool, [command, option])
                    #expect(r.code == 2, "\(tool) \(command) \(option): \(r.lines)")
                    #expect(!r.lines.joined().contains("unknown option"), "\(tool) \(command) --help lists \(option), which it does not take: \(r.lines)")
                }
            }
        }
    }

    /// Each option a command's usage line shows is explained in its
    /// "options:" section (status's --json was not).
    @Test func everyOptionOfAUsageLineIsExplained() throws {
        for (tool, commands) in Self.commands {
            for command in commands {
                let help = try run(tool, [command, "--help"]).lines
                let usage = help.prefix { !$0.isEmpty }.flatMap { $0.split(whereSeparator: { " []|".contains($0) }) }
                    .filter { $0.hasPrefix("--") && $0 != "--help" }.map(String.init)
                let explained = Set(help.drop { $0 != "options:" }.compactMap { $0.split(separator: " ").first.map(String.init) })
                for option in usage {
                    #expect(explained.contains(option), "\(tool) \(command) --help: \(option) is in the usage line, not under options:")
                }
            }
        }
    }

    /// The options a --help lists: those in its usage lines, and those that
    /// begin a line of its "options:" section.
    static func listedOptions(_ help: [String]) -> Set<String> {
        func isOption(_ word: Substring) -> Bool {
            word.hasPrefix("--") && word.count > 2 && word.dropFirst(2).allSatisfy { $0.isLetter || $0 == "-" }
        }
        let usage = help.prefix { !$0.isEmpty }.flatMap { $0.split(whereSeparator: { " []|".contains($0) }) }
        let section = help.drop { $0 != "options:" }.compactMap { $0.split(separator: " ").first }
        return Set((usage + section).filter(isOption).map(String.init))
    }

    /// A damaged store: every command's error names `steplog recover`, what
    /// it sets aside and where, and what the next ingest and upload do again;
    /// recover then does what was said.
    @Test func aDamagedStoreSaysHowToRecoverAndWhatItCosts() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("steps")
        #expect(try run("stepsync", ["ingest", "--store", store, "--source", "mock:days=3,end=2026-11-21"]).code == 0)
        let segment = store + "/" + SegmentName.fileName(sequence: 1)
        var bytes = readFile(segment)
        bytes[6_000] ^= 0xFF
        writeFile(segment, bytes)
        var advertised: String?
        for (tool, arguments) in [("stepsync", ["status", "--store", store]), ("stepsync", ["daily", "--store", store]),
                                  ("stepsync", ["upload", "--store", store]), ("steplog", ["stats", store])] {
            let r = try run(tool, arguments)
            #expect(r.code == 1 && r.lines.count == 1, "\(arguments): \(r.lines)")
            let line = r.lines.first ?? ""
            #expect(line.contains("corruption in \(segment) at offset "), "\(line)")
            #expect(line.contains(". The store is damaged: 'steplog recover \(store)' keeps every record before the damage and sets the "), "\(line)")
            #expect(line.hasSuffix("then 'stepsync ingest' fetches again what the source still has, and 'stepsync upload' sends again what the server acknowledged after the damage (it takes repeats idempotently)"), "\(line)")
            let setAside = line.components(separatedBy: "sets the ").last?.components(separatedBy: "; then").first
            #expect(advertised == nil || advertised == setAside)
            advertised = setAside
        }
        // "59.2 KiB after it (the rest of 000000000001.log) aside in DIR.salvage-1-OFFSET.bin"
        let said = try #require(advertised)
        let size = try #require(said.components(separatedBy: " after it").first)
        let file = try #require(said.components(separatedBy: " aside in ").last)
        let recovered = try run("steplog", ["recover", store])
        #expect(recovered.code == 0)
        #expect(recovered.lines.contains("kept everything before it; dropped \(size) (the rest of that segment and 0 later segments)"), "\(recovered.lines)")
        #expect(recovered.lines.contains("the dropped bytes are set aside in \(file)") && FileManager.default.fileExists(atPath: file))
        #expect(try run("stepsync", ["status", "--store", store]).code == 0)
    }

    @Test func aStoreAnotherProcessHoldsNamesItAndHowToStopIt() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("steps")
        let holder = try StepLogStore.open(store)
        defer { try? holder.close() }
        let r = try run("stepsync", ["ingest", "--store", store, "--source", "mock:days=3"])
        let locked = "store is locked by pid \(getpid()) (\(store)/LOCK). Another process writes it (stepsync ingest or upload, pid \(getpid())): let it finish, or stop it with kill -INT \(getpid()) (it pauses at a safe point), then run this again"
        #expect(r.code == 1 && r.lines == ["stepsync ingest: " + locked])
        // Said before an export is read (no "read …" line), by ingest and today alike.
        let export = tmp.sub("export.xml")
        writeFile(export, Array(ExportTestDocument.xml(records: [ExportTestRecord.step(minute: 0, count: 10)]).utf8))
        for command in ["ingest", "today"] {
            let r = try run("stepsync", [command, "--store", store, "--source", export])
            #expect(r.code == 1 && r.lines == ["stepsync \(command): " + locked], "\(r.lines)")
        }
    }
}
