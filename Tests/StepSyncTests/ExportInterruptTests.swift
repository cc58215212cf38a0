import Foundation
import Testing
@testable import StepLog
@testable import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C while `stepsync ingest` reads an export: it stops within a second,
/// exits 130, and leaves the store as it was (an existing one unmodified, a
/// new one never created); the next run starts the read again.
@Suite(.serialized) struct ExportInterruptTests {
    /// An export that takes many seconds to read: a few records, then 8 GB of
    /// NUL bytes between two elements (text, which the scanner skips; a hole
    /// in a sparse file, so no disk is used), then the rest.
    static func slowExport(in dir: TemporaryDirectory) throws -> String {
        let records = (0..<3).map { ExportTestRecord.step(minute: $0, count: 5 + $0) }
        let text = ExportTestDocument.xml(records: records)
        let closing = text.range(of: "</HealthData>")!
        let path = try dir.write("slow.xml", String(text[..<closing.lowerBound]))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.truncate(atOffset: UInt64(text[..<closing.lowerBound].utf8.count) + 8_000_000_000)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text[closing.lowerBound...].utf8))
        return path
    }

    /// The files of a store and their bytes, but for LOCK (which holds the
    /// pid of whoever opened the store last).
    static func contents(of store: String) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: store) where name != "LOCK" {
            files[name] = readFile(store + "/" + name)
        }
        return files
    }

    /// Starts `stepsync ingest`, waits until it reports bytes of the export
    /// read (a progress line after the one at the start), interrupts it,
    /// and returns its exit code, output and the seconds from SIGINT to its exit.
    static func interruptedIngest(store: String, source: String) throws -> (code: Int32, output: [String], seconds: Double) {
        let child = try ChildProcess(builtProduct("stepsync"), ["ingest", "--store", store, "--source", source],
                                     mergeStandardError: true)
        var output: [String] = []
        while let line = child.readLine() {
            output.append(line)
            if line.hasPrefix("reading export:"), line.contains("of XML"), !line.contains(" 0 B of XML") { break }
        }
        let sent = DispatchTime.now().uptimeNanoseconds
        child.kill(SIGINT)
        while let line = child.readLine() { output.append(line) }
        let code = child.wait()
        return (code, output, Double(DispatchTime.now().uptimeNanoseconds - sent) / 1e9)
    }

    @Test func ctrlCDuringTheReadStopsAtOnceAndLeavesTheStoreAlone() throws {
        let dir = TemporaryDirectory("steplog-export")
        let tmp = TemporaryDirectory()
        let slow = try Self.slowExport(in: dir)
        let stepsync = builtProduct("stepsync")

        // An existing store: not modified.
        let store = tmp.sub("store")
        let earlier = try dir.write("earlier.xml", ExportTestDocument.xml(records: (0..<5).map { ExportTestRecord.step(minute: $0, count: 9 + $0) }))
        #expect(try runProgram(stepsync, ["ingest", "--store", store, "--source", earlier]).code == 0)
        let before = try Self.contents(of: store)
        let run = try Self.interruptedIngest(store: store, source: slow)
        #expect(run.code == 130, "\(run.output)")
        #expect(run.seconds < 1.0, "stopped \(run.seconds) s after SIGINT")
        #expect(run.output.contains("stepsync ingest: stopped while reading the export; nothing was stored. To continue: stepsync ingest --store \(store) --source \(slow)"),
                "\(run.output)")
        #expect(!run.output.contains { $0.hasPrefix("layering:") })
        #expect(try Self.contents(of: store) == before)

        // A new store: not created.
        let fresh = tmp.sub("fresh")
        let again = try Self.interruptedIngest(store: fresh, source: slow)
        #expect(again.code == 130 && again.seconds < 1.0, "\(again.output), \(again.seconds) s")
        #expect(!FileManager.default.fileExists(atPath: fresh))

        // The next run reads the export again (nothing of the last read is
        // kept anywhere) and is stopped the same way. Its first line is a
        // progress line with bytes read: stderr is not a terminal, where the
        // line before any byte ("0 B of …, 0 B/s") is not printed.
        let third = try Self.interruptedIngest(store: store, source: slow)
        #expect(third.code == 130)
        #expect(third.output.first?.hasPrefix("reading export: ") == true, "\(third.output)")
        #expect(!third.output.contains { $0.contains(" 0 B of ") || $0.contains("(0 B/s") }, "\(third.output)")
        #expect(try Self.contents(of: store) == before)
    }
}
