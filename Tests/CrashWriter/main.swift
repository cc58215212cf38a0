// steplog-crash-writer DIR [--batches N] [--segment-size BYTES] [--batch-size SAMPLES]
//
// Test fixture for the SIGKILL tests: writes a deterministic history to the
// store in DIR, one batch at a time, and after each batch's sync prints
// "ACK <batch> <store bytes>" (flushed). From batch 3 on, a batch also
// deletes the first 10 samples of batch - 3, and every fourth batch
// acknowledges up to 25 pending deletions. The same arguments on an empty
// directory always produce the same bytes, so a killed run's store can be
// compared with a clean run's. Resumes at the batch after the last complete
// one (each batch ends with a layering-range record numbering it).
import Foundation
import StepLog

var arguments = Array(CommandLine.arguments.dropFirst())
guard let directory = arguments.first else {
    FileHandle.standardError.write(Data("usage: steplog-crash-writer DIR [--batches N] [--segment-size BYTES] [--batch-size SAMPLES]\n".utf8))
    exit(2)
}
var batches = Int.max
var segmentSize = 256 << 10
var batchSize = 1_000
var i = 1
while i + 1 < arguments.count {
    switch arguments[i] {
    case "--batches": batches = Int(arguments[i + 1])!
    case "--segment-size": segmentSize = Int(arguments[i + 1])!
    case "--batch-size": batchSize = Int(arguments[i + 1])!
    default: FileHandle.standardError.write(Data("unknown option \(arguments[i])\n".utf8)); exit(2)
    }
    i += 2
}

func sample(_ n: Int, version: Int) -> StepSample {
    let id = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012x", n))!
    return StepSample(id: id, startMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000,
                      endMilliseconds: 1_700_000_000_000 + Int64(n) * 60_000 + 45_000,
                      count: (n * 7 + version * 13) % 500, sourceBundleId: "com.apple.health",
                      sourceDeviceName: n % 3 == 0 ? nil : "Apple\u{00A0}Watch")
}

do {
    var options = StoreOptions(segmentSize: segmentSize)
    options.writeBufferSize = 8 << 10 // records reach the file all through a batch, not only at sync
    let store = try StepLogStore.open(directory, options: options)
    var batch = store.layeringRanges.count
    while batch < batches {
        var samples = (0..<batchSize).map { sample(batch * batchSize + $0, version: 0) }
        if batch >= 5 { samples.append(sample((batch - 5) * batchSize + batch % batchSize, version: batch)) } // a changed version
        try store.upsert(samples, fetchedAt: Date(timeIntervalSince1970: Double(batch)))
        if batch % 2 == 1 { try store.markSynced(try store.unsyncedSamples(limit: batchSize + batchSize / 2)) }
        if batch >= 3 {
            try store.delete((0..<min(10, batchSize)).map { sample((batch - 3) * batchSize + $0, version: 0).id },
                             at: Date(timeIntervalSince1970: Double(batch)))
        }
        if batch % 4 == 2 { try store.markDeletionsAcknowledged(try store.pendingDeletions(limit: 25)) }
        try store.recordIntervals([SyncInterval(id: UUID(uuidString: String(format: "00000000-0000-4000-9000-%012x", batch % 7))!,
                                                startMilliseconds: Int64(batch % 7), endMilliseconds: Int64(batch % 7) + 1,
                                                stepCount: Int64(batch), status: .fetched)])
        try store.recordLayeringRange(LayeringRange(startMilliseconds: Int64(batch), endMilliseconds: Int64(batch) + 1))
        try store.sync()
        FileHandle.standardOutput.write(Data("ACK \(batch) \(store.counts.bytes)\n".utf8)) // unbuffered: a kill loses no ACK
        batch += 1
    }
    try store.close()
} catch {
    FileHandle.standardError.write(Data("steplog-crash-writer: \(error)\n".utf8))
    exit(1)
}
