import Foundation
import Testing
@testable import StepLog

/// A real writer process killed with SIGKILL at random moments: every batch
/// it acknowledged must be there, what is there must be exactly a prefix of
/// what a clean run writes, and the store must take writes again.
@Suite(.serialized) struct CrashTests {
    @Test func killedWritersLoseNothingAcknowledged() throws {
        let tmp = TemporaryDirectory()
        let writer = builtProduct("steplog-crash-writer")
        let reference = tmp.sub("reference")
        let clean = try ChildProcess(writer, [reference, "--batches", "120"])
        while clean.readLine() != nil {}
        #expect(clean.wait() == 0)
        let referenceBytes = segmentFiles(reference).map(readFile)

        var rng = SeededGenerator(seed: 20261121)
        var tornTails = 0, beyondAck = 0
        for run in 0..<24 {
            let dir = tmp.sub("run\(run)")
            let child = try ChildProcess(writer, [dir])
            let target = Int.random(in: 0...40, using: &rng)
            var acked = (batch: -1, bytes: Int64(0))
            func take(_ line: String) {
                let parts = line.split(separator: " ")
                if parts.count == 3, parts[0] == "ACK", let b = Int(parts[1]), let n = Int64(parts[2]) { acked = (b, n) }
            }
            while acked.batch < target, let line = child.readLine() { take(line) }
            // A random moment inside the next batch (a batch takes ~15 ms in a debug build).
            usleep(UInt32.random(in: 0...15_000, using: &rng))
            child.kill()
            _ = child.wait()
            while let line = child.readLine() { take(line) } // acknowledged before the kill landed

            let store = try StepLogStore.open(dir, options: StoreOptions(segmentSize: 256 << 10))
            #expect(store.counts.bytes >= acked.bytes, "run \(run): acknowledged \(acked.bytes) bytes, recovered \(store.counts.bytes)")
            #expect(store.layeringRanges.count >= acked.batch + 1, "run \(run): batch \(acked.batch) was acknowledged")
            // Deletions acknowledged with their batch are there (pending or acknowledged: never live).
            if acked.batch >= 3 {
                for b in 3...acked.batch {
                    let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012x", (b - 3) * 1_000))!
                    if case .live = try store.sampleState(id: id) { Issue.record("run \(run): the deletion of batch \(b) was lost") }
                }
            }
            if store.openReport.tornTail != nil { tornTails += 1 }
            if store.counts.bytes > acked.bytes { beyondAck += 1 }
            try store.close()

            let files = segmentFiles(dir)
            #expect(files.count <= referenceBytes.count, "run \(run) outran the reference")
            for (i, file) in files.enumerated() where i < referenceBytes.count {
                let bytes = readFile(file)
                let isLast = i == files.count - 1
                #expect(isLast ? Array(referenceBytes[i].prefix(bytes.count)) == bytes : referenceBytes[i] == bytes,
                        "run \(run): \(file) is not a prefix of the clean run's bytes")
            }
            // Clean on reopen, and writing continues from where it stopped.
            let again = try StepLogStore.open(dir, options: StoreOptions(segmentSize: 256 << 10))
            #expect(again.openReport.tornTail == nil && again.openReport.salvage == nil)
            let batchesBefore = again.layeringRanges.count
            try again.close()
            _ = try readAllRecords(dir)
            let more = try ChildProcess(writer, [dir, "--batches", String(batchesBefore + 3)])
            var firstAck: String?
            while let line = more.readLine() { firstAck = firstAck ?? line }
            #expect(more.wait() == 0)
            #expect(firstAck?.hasPrefix("ACK \(batchesBefore) ") == true)
        }
        // Where the kills landed (diagnostic: how often mid-write, how often past the last ACK).
        print("crash test: 24 kills, \(tornTails) left a torn tail, \(beyondAck) had unacknowledged records on disk")
    }
}
