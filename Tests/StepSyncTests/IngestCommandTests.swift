import Foundation
import Testing
@testable import StepLog
@testable import StepSync

/// The real `stepsync` binary: ingest, status, intervals, export, usage
/// errors, and killed runs that resume to exactly a clean run's result.
@Suite(.serialized) struct IngestCommandTests {
    let stepsync = builtProduct("stepsync")

    func json(_ line: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func ingestStatusIntervalsExportAndAgain() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        let source = "mock:days=60,end=2026-11-21"
        let first = try runProgram(stepsync, ["ingest", "--store", store, "--source", source])
        #expect(first.code == 0)
        #expect(first.lines.first?.hasPrefix("ingest complete: mock:seed=42,days=60,end=2026-11-21") == true)

        let status = try json(try #require(try runProgram(stepsync, ["status", "--store", store, "--json"]).lines.first))
        let samples = try #require(status["samples"] as? Int)
        #expect(samples > 60 * 50)
        #expect(status["syncedSamples"] as? Int == 0)
        #expect(status["unsyncedSamples"] as? Int == samples)
        let intervals = try #require(status["intervals"] as? [String: Int])
        #expect(intervals["pending"] == 0 && intervals["synced"] == 0 && (intervals["fetched"] ?? 0) > 0)
        #expect(status["stage"] as? String == "ready to upload")

        let intervalLines = try runProgram(stepsync, ["intervals", "--store", store]).lines
        #expect(intervalLines.count == intervals.values.reduce(0, +))
        var previousEnd: String?
        for line in intervalLines {
            let object = try json(line)
            #expect(Set(object.keys) == ["id", "start", "end", "stepCount", "status"])
            let start = try #require(object["start"] as? String), end = try #require(object["end"] as? String)
            #expect(start.hasSuffix("Z") && end.hasSuffix("Z"))
            if let previousEnd { #expect(previousEnd == start) } // time order, no gaps
            previousEnd = end
            #expect((object["stepCount"] as? Int ?? 99_999) <= 10_000)
        }

        let export = try runProgram(stepsync, ["export", "--store", store])
        #expect(export.code == 0 && export.lines.count == samples)
        let keys = try export.lines.map { line -> (String, String) in
            let o = try json(line)
            #expect(Set(o.keys) == ["id", "startDate", "endDate", "count", "sourceBundleId", "sourceDeviceName"])
            return (o["startDate"] as! String, o["id"] as! String)
        }
        #expect(zip(keys, keys.dropFirst()).allSatisfy { $0 <= $1 }, "export must be ordered by startDate, then id")

        // Again: nothing changes, not even a byte of the log.
        let bytes = status["bytes"] as? Int
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", source]).code == 0)
        let after = try json(try #require(try runProgram(stepsync, ["status", "--store", store, "--json"]).lines.first))
        #expect(after["bytes"] as? Int == bytes && after["samples"] as? Int == samples)
        #expect(try runProgram(stepsync, ["export", "--store", store]).lines == export.lines)
    }

    @Test func usageAndStoreErrors() throws {
        let tmp = TemporaryDirectory()
        func run(_ args: [String]) throws -> (Int32, String) {
            let r = try runProgram(stepsync, args, mergeStandardError: true)
            return (r.code, r.lines.joined(separator: "\n"))
        }
        var (code, text) = try run(["ingest"])
        #expect(code == 2 && text.contains("--store is required"))
        (code, text) = try run(["ingest", "--store", tmp.sub("s"), "--colour"])
        #expect(code == 2 && text.contains("unknown option --colour"))
        (code, text) = try run(["ingest", "--store", tmp.sub("s"), "--source", "mock:colour=red"])
        #expect(code == 2 && text.contains("unknown mock option 'colour'"))
        (code, text) = try run(["frobnicate"])
        #expect(code == 2 && text.contains("unknown command"))
        (code, text) = try run(["status", "--store", tmp.sub("missing")])
        #expect(code == 1 && text.contains("is not a StepLog store: no such directory"))
        // No --source: the mock is not a default (it filled real stores with made-up steps).
        (code, text) = try run(["ingest", "--store", tmp.sub("s")])
        #expect(code == 2 && text == "stepsync ingest: --source is required: the path of an Apple Health export.zip / export.xml, or mock[:…] for made-up steps (see 'stepsync ingest --help')")
        #expect(!FileManager.default.fileExists(atPath: tmp.sub("s")))
        writeFile(tmp.sub("file"), [1])
        (code, text) = try run(["ingest", "--store", tmp.sub("file"), "--source", "mock"])
        #expect(code == 1 && text.contains("is not a StepLog store"))
        #expect(text.split(separator: "\n").count == 1) // one line
        for command in ["ingest", "status", "intervals", "export"] {
            (code, text) = try run([command, "--help"])
            #expect(code == 0 && text.hasPrefix("usage: stepsync \(command)"))
        }
        // Bad export input: one line naming the file, nothing stored is touched.
        let kept = tmp.sub("kept")
        let good = tmp.sub("good.xml")
        writeFile(good, Array(ExportTestDocument.xml(records: (0..<20).map { ExportTestRecord.step(minute: 3 * $0, count: 40 + $0) }).utf8))
        #expect(try run(["ingest", "--store", kept, "--source", good]).0 == 0)
        let before = try runProgram(stepsync, ["export", "--store", kept]).lines
        (code, text) = try run(["ingest", "--store", kept, "--source", tmp.sub("nope.zip")])
        #expect(code == 2 && text.contains("no such file"))
        writeFile(tmp.sub("junk.zip"), Array("this is not an export".utf8))
        (code, text) = try run(["ingest", "--store", kept, "--source", tmp.sub("junk.zip")])
        #expect(code == 1 && text.contains(tmp.sub("junk.zip")) && text.split(separator: "\n").count == 1)
        var truncated = Array(repeating: UInt8(0), count: 0)
        truncated += Array("PK\u{03}\u{04}".utf8) + Array(repeating: 7, count: 100)
        writeFile(tmp.sub("cut.zip"), truncated)
        (code, text) = try run(["ingest", "--store", kept, "--source", tmp.sub("cut.zip")])
        #expect(code == 1 && text.contains(tmp.sub("cut.zip")))
        #expect(try runProgram(stepsync, ["export", "--store", kept]).lines == before)
        // An unzipped export (what Safari leaves): the line names the file in it to give.
        let unzipped = tmp.sub("Export")
        try FileManager.default.createDirectory(atPath: unzipped + "/apple_health_export", withIntermediateDirectories: true)
        writeFile(unzipped + "/apple_health_export/export.xml", readFile(good))
        (code, text) = try run(["ingest", "--store", kept, "--source", unzipped])
        #expect(code == 2 && text == "stepsync ingest: --source \(unzipped) is a folder (an unzipped export): give the export.xml in it, --source \(unzipped)/apple_health_export/export.xml")
        (code, text) = try run(["ingest", "--store", kept, "--source", tmp.path])
        #expect(code == 2 && text.hasSuffix("is a folder, not an export: give the export.zip the Health app shared, or the export.xml inside it once unzipped"))
        #expect(try runProgram(stepsync, ["export", "--store", kept]).lines == before)
        // A bad source given with a store path that does not exist yet creates nothing.
        for source in [tmp.sub("nope.zip"), tmp.sub("junk.zip"), tmp.sub("cut.zip")] {
            (code, _) = try run(["ingest", "--store", tmp.sub("new"), "--source", source])
            #expect(code != 0 && !FileManager.default.fileExists(atPath: tmp.sub("new")), "\(source)")
        }
        // A store another process writes is refused with its pid.
        let store = tmp.sub("locked")
        let holder = try StepLogStore.open(store)
        (code, text) = try run(["ingest", "--store", store, "--source", "mock:days=3"])
        #expect(code == 1 && text.contains("store is locked by pid \(getpid())"))
        try holder.close()
    }

    @Test func killedIngestsResumeToTheCleanExport() throws {
        let tmp = TemporaryDirectory()
        let source = "mock:days=200,end=2026-11-21,latency=2"
        let clean = tmp.sub("clean")
        #expect(try runProgram(stepsync, ["ingest", "--store", clean, "--source", source]).code == 0)
        let expected = try runProgram(stepsync, ["export", "--store", clean]).lines
        #expect(expected.count > 200 * 50)

        let store = tmp.sub("killed")
        var rng = SeededGenerator(seed: 3)
        var stages: [PipelineStage] = []
        var kills = 0
        while kills < 14 {
            // Even kills at a random moment from the start (early on, during
            // layering); odd ones a random moment after the child says layering
            // is done, so some land in the fetch however slow the machine is.
            let child = try ChildProcess(stepsync, ["ingest", "--store", store, "--source", source], mergeStandardError: true)
            if kills % 2 == 1 {
                while let line = child.readLine(), !line.contains("(done)") {}
                usleep(UInt32.random(in: 0...50_000, using: &rng))
            } else {
                usleep(UInt32.random(in: 30_000...400_000, using: &rng))
            }
            child.kill()
            if child.wait() == 0 { break } // finished before the kill: nothing left to interrupt
            kills += 1
            var options = StoreOptions()
            options.readOnly = true
            stages.append(PipelineStage.of(try StepLogStore.open(store, options: options)))
        }
        #expect(kills >= 10)
        #expect(stages.contains(.layering) || stages.contains(.notStarted), "some kills should land during layering: \(stages)")
        #expect(stages.contains(.fetching), "some kills should land during fetching: \(stages)")
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", source]).code == 0)
        let export = try runProgram(stepsync, ["export", "--store", store]).lines
        #expect(export == expected)
    }

    @Test func sigintPausesAtASafePointAndTheSameCommandContinues() throws {
        let tmp = TemporaryDirectory()
        let store = tmp.sub("store")
        let source = "mock:days=90,end=2026-11-21,latency=2"
        let child = try ChildProcess(stepsync, ["ingest", "--store", store, "--source", source], mergeStandardError: true)
        // Its first progress line means the handler is installed and layering
        // (over a second of 2 ms queries) has begun: interrupt it there.
        var output: [String] = []
        if let first = child.readLine() { output.append(first) }
        #expect(output.first?.hasPrefix("layering:") == true, "\(output)")
        child.kill(SIGINT)
        while let line = child.readLine() { output.append(line) }
        #expect(child.wait() == 130)
        #expect(output.contains { $0.contains("paused during") && $0.contains("To continue: stepsync ingest --store \(store) --source \(source)") })
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", source]).code == 0)
        let clean = tmp.sub("clean")
        #expect(try runProgram(stepsync, ["ingest", "--store", clean, "--source", source]).code == 0)
        #expect(try runProgram(stepsync, ["export", "--store", store]).lines == runProgram(stepsync, ["export", "--store", clean]).lines)
    }
}
