// stepsync-store-fixture delete|change DIR --every K [--limit N] [--count C] [--where-count W]
// stepsync-store-fixture merge DIR --from OTHER
//
// Test and benchmark fixture: changes a store the way a source would, without
// a provider. `delete` deletes every K-th live sample (in log order) as its
// source deleted it — a tombstone waiting for upload; `change` writes a new
// version of every K-th live sample — an addition waiting for upload — with
// count + 1, or with count C when given (2000000 is more than the server
// accepts: a poisoned sample). At most N of them (default: all); with
// --where-count, only among samples whose count is W. `merge` upserts every
// live sample of the store OTHER into DIR, as they are (origin included): a
// store holding two sources' samples, as an older stepsync made when the mock
// and an export went into one store. Syncs, then
// prints `{"deleted":D}`, `{"changed":C}` or `{"merged":M}` on stdout. Deterministic: the same store
// and arguments always pick the same samples. Not part of the product
// (`stepsync` has no way to delete a sample by hand, by design).
import Foundation
import StepLog

func fail(_ message: String, _ code: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("stepsync-store-fixture: \(message)\n".utf8))
    exit(code)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2, ["delete", "change", "merge"].contains(arguments[0]) else {
    fail("usage: stepsync-store-fixture delete|change DIR --every K [--limit N] [--count C] [--where-count W] | merge DIR --from OTHER")
}
let command = arguments[0], directory = arguments[1]
if command == "merge" {
    guard arguments.count == 4, arguments[2] == "--from" else { fail("usage: stepsync-store-fixture merge DIR --from OTHER") }
    do {
        var options = StoreOptions(createIfMissing: false)
        options.readOnly = true
        let other = try StepLogStore.open(arguments[3], options: options)
        var samples: [StepSample] = []
        try other.forEachSample { samples.append($0.sample) }
        try other.close()
        let store = try StepLogStore.open(directory, options: StoreOptions(createIfMissing: false))
        let summary = try store.upsert(samples, fetchedAt: Date())
        try store.sync()
        try store.close()
        print("{\"merged\":\(summary.inserted)}")
        exit(0)
    } catch {
        fail("\(error)", 1)
    }
}
var every = 1
var limit = Int.max
var count: Int?
var whereCount: Int?
var i = 2
while i < arguments.count {
    guard i + 1 < arguments.count, let value = Int(arguments[i + 1]), value >= 0 else { fail("\(arguments[i]) needs a number") }
    switch arguments[i] {
    case "--every": every = max(1, value)
    case "--limit": limit = value
    case "--count": count = value
    case "--where-count": whereCount = value
    default: fail("unknown option \(arguments[i])")
    }
    i += 2
}

do {
    let store = try StepLogStore.open(directory, options: StoreOptions(createIfMissing: false))
    var picked: [StepSample] = []
    var n = 0
    try store.forEachSample { stored in
        if let whereCount, stored.sample.count != whereCount { return }
        if n % every == 0 && picked.count < limit { picked.append(stored.sample) }
        n += 1
    }
    let now = Date()
    switch command {
    case "delete":
        let summary = try store.delete(picked.map(\.id), at: now)
        try store.sync()
        print("{\"deleted\":\(summary.deleted)}")
    default:
        let changed = picked.map { s -> StepSample in
            var c = s
            c.count = count ?? s.count + 1
            return c
        }
        let summary = try store.upsert(changed, fetchedAt: now)
        try store.sync()
        print("{\"changed\":\(summary.updated)}")
    }
    try store.close()
} catch {
    fail("\(error)", 1)
}
