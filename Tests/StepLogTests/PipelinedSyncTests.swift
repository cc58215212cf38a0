import Foundation
import Testing
@testable import StepLog
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Holds and fails the syncs of one store's segment files, through the I/O
/// seam, and remembers how much of the file each sync made durable.
private final class SegmentSyncGate: FileOperationInterposer, @unchecked Sendable {
    let root: String
    private let condition = NSCondition()
    /// Segment syncs entered so far; while `holding`, sync n waits until `released >= n`.
    private var entered = 0
    private var released = 0
    private var holding: Bool
    /// Syncs numbered at least this fail with EIO (not performed).
    private var failFrom: Int?
    /// Per segment file: the size its last successful sync made durable.
    private var durable: [String: Int64] = [:]
    /// File size when each sync was entered, in order.
    private(set) var sizesAtEntry: [Int64] = []

    init(root: String, holding: Bool = false) {
        self.root = root
        self.holding = holding
    }

    func intercept(_ operation: FileOperation, perform: () -> Int32) -> Int32 {
        guard case .sync(let path, let descriptor) = operation, path.hasSuffix(".log") else { return perform() }
        var info = stat()
        fstat(descriptor, &info)
        condition.lock()
        entered += 1
        let n = entered
        sizesAtEntry.append(Int64(info.st_size))
        condition.broadcast()
        while holding && released < n { condition.wait() }
        let fails = failFrom.map { n >= $0 } ?? false
        condition.unlock()
        let code = fails ? EIO : perform()
        if code == 0 { condition.withLock { durable[path] = max(durable[path] ?? 0, Int64(info.st_size)) } }
        return code
    }

    func waitUntilEntered(_ n: Int) {
        condition.withLock { while entered < n { condition.wait() } }
    }

    func release(through n: Int) {
        condition.withLock { released = max(released, n); condition.broadcast() }
    }

    func stopHolding() {
        condition.withLock { holding = false; condition.broadcast() }
    }

    func fail(from n: Int) { condition.withLock { failFrom = n } }

    var durableSizes: [String: Int64] { condition.withLock { durable } }

    func install() { IORecorderRouter.shared.add(self, root: root) }
    func uninstall() { IORecorderRouter.shared.remove(self) }
}

/// A store in a new directory whose segment syncs wait at a gate (installed
/// here; the test uninstalls it), with a first batch written and its sync
/// asked for.
private struct HeldFirstSync {
    let tmp = TemporaryDirectory()
    let dir: String
    let store: StepLogStore
    let gate: SegmentSyncGate
    let first: DurabilityTicket

    init(options: StoreOptions, batch: [StepSample]) throws {
        dir = tmp.sub("store")
        store = try StepLogStore.open(dir, options: options)
        gate = SegmentSyncGate(root: dir, holding: true)
        gate.install()
        try store.upsert(batch, fetchedAt: Date())
        first = try store.syncInBackground()
    }
}

/// `syncInBackground` / `waitUntilDurable`: batch k+1 is written while batch
/// k syncs, and each batch is acknowledged only after its own sync.
@Suite struct PipelinedSyncTests {
    /// No preallocation: every sync of a segment file is the writer's.
    private static var options: StoreOptions {
        var o = StoreOptions()
        o.preallocationSize = 0
        return o
    }

    private static func batch(_ k: Int, size: Int = 100) -> [StepSample] {
        (0..<size).map { makeSample(UInt64(k * size + $0 + 1)) }
    }

    private static func ids(_ store: StepLogStore) throws -> Set<UUID> {
        var result = Set<UUID>()
        try store.forEachSample { result.insert($0.id) }
        return result
    }

    @Test func aBatchIsAcknowledgedOnlyAfterItsOwnSyncAndTheNextIsWrittenMeanwhile() throws {
        let held = try HeldFirstSync(options: Self.options, batch: Self.batch(0))
        defer { held.gate.uninstall() }
        let (dir, store, gate, first) = (held.dir, held.store, held.gate, held.first)
        gate.waitUntilEntered(1)
        // Sync 1 is held: the next batch is written and its sync asked for.
        try store.upsert(Self.batch(1), fetchedAt: Date())
        let second = try store.syncInBackground()
        #expect(first < second)
        #expect(!store.isDurable(first) && !store.isDurable(second))

        gate.release(through: 1)
        try store.waitUntilDurable(first)
        #expect(store.isDurable(first))
        // The second batch's sync started after the first one returned; it is held.
        gate.waitUntilEntered(2)
        #expect(!store.isDurable(second))
        // Each sync began with its batch's bytes in the file.
        let sizes = gate.sizesAtEntry
        let base = store.segmentInfos.last!.basePosition
        #expect(sizes[0] >= Int64(first.position - base) && sizes[0] < Int64(second.position - base))
        #expect(sizes[1] >= Int64(second.position - base))

        gate.release(through: 2)
        try store.waitUntilDurable(second)
        gate.stopHolding()
        try store.close()
        gate.uninstall()
        let reopened = try StepLogStore.open(dir, options: Self.options)
        #expect(try Self.ids(reopened) == Set((Self.batch(0) + Self.batch(1)).map(\.id)))
        try reopened.close()
    }

    @Test func ticketsBecomeDurableInOrderAcrossSegmentRolls() throws {
        let tmp = TemporaryDirectory()
        let dir = tmp.sub("store")
        var options = Self.options
        options.segmentSize = 64 << 10 // a roll every few batches
        let store = try StepLogStore.open(dir, options: options)
        var tickets: [DurabilityTicket] = []
        var written: [StepSample] = []
        for k in 0..<40 {
            let b = Self.batch(k)
            try store.upsert(b, fetchedAt: Date())
            written += b
            tickets.append(try store.syncInBackground())
            if tickets.count >= 2 {
                let acknowledged = tickets[tickets.count - 2]
                try store.waitUntilDurable(acknowledged)
                #expect(tickets.allSatisfy { $0 > acknowledged || store.isDurable($0) })
            }
        }
        try store.waitUntilDurable(tickets.last!)
        #expect(zip(tickets, tickets.dropFirst()).allSatisfy { $0 < $1 })
        #expect(store.segmentInfos.count > 3)
        try store.close()
        let reopened = try StepLogStore.open(dir, options: options)
        #expect(try Self.ids(reopened) == Set(written.map(\.id)))
        #expect(reopened.openReport.tornTail == nil)
        try reopened.close()
    }

    @Test func aFailedSyncFailsItsBatchAndEveryLaterOne() throws {
        let held = try HeldFirstSync(options: Self.options, batch: Self.batch(0))
        defer { held.gate.uninstall() }
        let (dir, store, gate, first) = (held.dir, held.store, held.gate, held.first)
        gate.release(through: 1)
        try store.waitUntilDurable(first)

        gate.fail(from: 2)
        try store.upsert(Self.batch(1), fetchedAt: Date())
        let second = try store.syncInBackground()
        gate.waitUntilEntered(2)
        // Written while sync 2 runs (and will fail): never acknowledged.
        try store.upsert(Self.batch(2), fetchedAt: Date())
        let third = try store.syncInBackground()
        gate.release(through: 3)
        gate.stopHolding()

        #expect(throws: StepLogError.self) { try store.waitUntilDurable(second) }
        #expect(throws: StepLogError.self) { try store.waitUntilDurable(third) }
        #expect(!store.isDurable(second) && !store.isDurable(third))
        #expect(store.isDurable(first))
        // Sticky: the store refuses every later write and sync.
        #expect(throws: StepLogError.self) { try store.upsert(Self.batch(3), fetchedAt: Date()) }
        #expect(throws: StepLogError.self) { try store.syncInBackground() }
        #expect(throws: StepLogError.self) { try store.sync() }
        try? store.close()

        // A power loss now keeps only what a successful sync made durable.
        let durable = gate.durableSizes
        gate.uninstall()
        for path in segmentFiles(dir) {
            if let size = durable[path] { #expect(truncate(path, off_t(size)) == 0) }
        }
        let reopened = try StepLogStore.open(dir, options: Self.options)
        #expect(try Self.ids(reopened) == Set(Self.batch(0).map(\.id)))
        try reopened.close()
    }

    /// Replay: pipelined batches, a power loss after each sync in turn (the
    /// file cut to what the last successful sync covered), reopen: the store
    /// holds a prefix of the batches that contains every acknowledged one.
    @Test func aPowerLossLeavesAPrefixHoldingEveryAcknowledgedBatch() throws {
        for crashAfter in 1...8 {
            let tmp = TemporaryDirectory()
            let dir = tmp.sub("store")
            let store = try StepLogStore.open(dir, options: Self.options)
            let gate = SegmentSyncGate(root: dir, holding: true)
            gate.install()
            var acknowledged = 0
            var tickets: [DurabilityTicket] = []
            // Sync n (batch n-1's) is released once batch n is written and its
            // sync asked for: the pipeline is full.
            for k in 0..<10 {
                try store.upsert(Self.batch(k), fetchedAt: Date())
                // Sync k has begun, so this request waits for its own sync.
                gate.waitUntilEntered(k)
                tickets.append(try store.syncInBackground())
                if k >= 1 {
                    gate.release(through: k)
                    if k <= crashAfter {
                        try store.waitUntilDurable(tickets[k - 1])
                        acknowledged = k
                    }
                }
                if k == crashAfter { break }
            }
            let durable = gate.durableSizes
            gate.stopHolding()
            gate.uninstall()
            store.abandon() // as a killed process leaves it
            for path in segmentFiles(dir) {
                #expect(truncate(path, off_t(durable[path] ?? Int64(FormatConstants.dataStartV2))) == 0)
            }
            let reopened = try StepLogStore.open(dir, options: Self.options)
            let found = try Self.ids(reopened)
            let kept = (0...crashAfter).first { !found.isSuperset(of: Set(Self.batch($0).map(\.id))) } ?? crashAfter + 1
            let prefix = Set((0..<kept).flatMap { Self.batch($0) }.map(\.id))
            #expect(found == prefix, "crash after batch \(crashAfter): not a prefix of the batches")
            #expect(kept >= acknowledged, "crash after batch \(crashAfter): acknowledged \(acknowledged), kept \(kept)")
            try reopened.close()
        }
    }
}
