import Foundation

/// What `stepbench open DIR --json` prints for one open, and how the other
/// benchmarks get it: by running that command in a fresh process, so the
/// figure is what a user's next launch would see (warm page cache, cold heap).
struct OpenFigures: Codable {
    var seconds: Double
    var samples: Int
    var indexBytes: Int
    var recordsReplayed: Int
    var segmentsFromSnapshots: Int
    /// Snapshot entries applied by two threads at once (`OpenReport`).
    var snapshotEntriesInParallel: Int
    var userSeconds: Double
    var systemSeconds: Double

    /// The median of `repeats` opens of `directory`, each in a new process.
    static func medianOfFreshProcesses(_ directory: String, snapshots: Bool, repeats: Int = 3) throws -> OpenFigures {
        var runs: [OpenFigures] = []
        for _ in 0..<repeats {
            let process = Process()
            process.executableURL = Bundle.main.executableURL
            process.arguments = ["open", directory, "--json"] + (snapshots ? [] : ["--no-snapshots"])
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            let output = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw BenchError("stepbench open \(directory) exited with status \(process.terminationStatus)")
            }
            runs.append(try JSONDecoder().decode(OpenFigures.self, from: output))
        }
        return runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
    }
}
