import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Replays segments into a `StoreState` on two threads: a reader thread reads
/// each segment, checks every checksum and the shape of sample payloads, and
/// hands over chunks of parsed records; the calling thread applies them in
/// log order, prefetching index slots a few records ahead. Reading and
/// checking (I/O, CRC) then overlap with the index's random memory accesses,
/// which are the two halves of opening a large store.
///
/// Replay stops at the first damage; everything before it is applied, so the
/// caller decides (torn tail, salvage, or error) exactly as a sequential
/// replay would.
struct ReplayPipeline {
    let segments: [SegmentInfo]

    enum Outcome {
        /// Every segment replayed; `dataEnds` holds where each one's records end
        /// (before any zero-filled space the writer had prepared).
        case clean(dataEnds: [Int64])
        /// Damage in `segments[segmentIndex]` at `offset`; `mayBeTorn` is false
        /// for a checksummed record with a malformed payload.
        case damaged(segmentIndex: Int, offset: Int64, reason: String, mayBeTorn: Bool)
    }

    /// Records per chunk handed from the reader to the applier.
    static let chunkRecords = 16_384
    /// Chunks that may wait between the two threads.
    static let queueDepth = 8
    /// How many sample versions ahead the applier prefetches.
    static let prefetchDistance = 16

    func run(into state: StoreState, report: inout OpenReport) throws -> Outcome {
        let queue = ChunkQueue(depth: Self.queueDepth)
        let segments = self.segments
        let reader = Thread { ReplayPipeline.read(segments, into: queue) }
        reader.stackSize = 1 << 20
        reader.start()
        defer { queue.cancel() }
        var dataEnds = segments.map(\.size)
        while true {
            switch queue.take() {
            case .chunk(let chunk):
                if let problem = apply(chunk, to: state) {
                    queue.cancel()
                    report.records += problem.applied
                    report.bytesReplayed += problem.offset
                    return .damaged(segmentIndex: chunk.segmentIndex, offset: problem.offset,
                                    reason: problem.reason, mayBeTorn: false)
                }
                report.records += chunk.kinds.count
                if let end = chunk.dataEnd {
                    report.bytesReplayed += end
                    dataEnds[chunk.segmentIndex] = end
                }
            case .damage(let segmentIndex, let offset, let reason, let mayBeTorn):
                report.bytesReplayed += offset
                return .damaged(segmentIndex: segmentIndex, offset: offset, reason: reason, mayBeTorn: mayBeTorn)
            case .failed(let error):
                throw error
            case .finished:
                return .clean(dataEnds: dataEnds)
            }
        }
    }

    // MARK: Reader thread

    private static func read(_ segments: [SegmentInfo], into queue: ChunkQueue) {
        do {
            for (index, segment) in segments.enumerated() {
                let fd = try FileDescriptor.open(segment.path, O_RDONLY)
                defer { fd.close() }
                fd.adviseSequential()
                var reader = SegmentReader(fd: fd, fileSize: segment.size)
                var chunk = Chunk(segmentIndex: index)
                let base = segment.basePosition
                while let item = try reader.next() {
                    switch item {
                    case .record(let offset, let type, let payload, _):
                        if type == RecordType.sampleUpsert.rawValue {
                            guard SamplePayload.isWellFormed(payload) else {
                                guard queue.put(.chunk(chunk)) else { return }
                                _ = queue.put(.damage(segmentIndex: index, offset: offset,
                                                      reason: "sample-upsert payload of \(payload.count) bytes is malformed",
                                                      mayBeTorn: false))
                                return
                            }
                            chunk.kinds.append(type)
                            chunk.keys.append(SamplePayload.uuid(payload))
                            chunk.entries.append(IndexEntry(position: LogPosition(base + UInt64(offset)),
                                                            synced: SamplePayload.flags(payload) & FormatConstants.sampleFlagSynced != 0))
                        } else {
                            chunk.kinds.append(type)
                            chunk.others.append(Chunk.Other(type: type, payload: Array(payload), offset: offset,
                                                            position: LogPosition(base + UInt64(offset))))
                        }
                        if chunk.kinds.count == chunkRecords {
                            guard queue.put(.chunk(chunk)) else { return }
                            chunk = Chunk(segmentIndex: index)
                        }
                    case .damage(let offset, let damage):
                        guard queue.put(.chunk(chunk)) else { return }
                        _ = queue.put(.damage(segmentIndex: index, offset: offset, reason: damage.description, mayBeTorn: true))
                        return
                    }
                }
                chunk.dataEnd = reader.offset
                guard queue.put(.chunk(chunk)) else { return }
            }
            _ = queue.put(.finished)
        } catch {
            _ = queue.put(.failed(error))
        }
    }

    // MARK: Applying thread

    /// Applies a chunk in order. Returns the first record whose payload does
    /// not have its type's shape (and how many records came before it).
    private func apply(_ chunk: Chunk, to state: StoreState) -> (offset: Int64, reason: String, applied: Int)? {
        let keys = chunk.keys
        let distance = Self.prefetchDistance
        for i in 0..<min(distance, keys.count) { state.index.prefetch(keys[i]) }
        var sample = 0
        var other = 0
        for (n, kind) in chunk.kinds.enumerated() {
            if kind == RecordType.sampleUpsert.rawValue {
                if sample + distance < keys.count { state.index.prefetch(keys[sample + distance]) }
                let entry = chunk.entries[sample]
                state.applySampleVersion(keys[sample], position: entry.position, synced: entry.isSynced)
                sample += 1
            } else {
                let record = chunk.others[other]
                other += 1
                let problem = record.payload.withUnsafeBytes { state.replay(type: record.type, payload: $0, at: record.position) }
                if let problem { return (record.offset, problem.description, n) }
            }
        }
        state.finishReplay()
        return nil
    }
}

/// Parsed records of part of one segment, in log order.
struct Chunk: Sendable {
    struct Other: Sendable {
        var type: UInt8
        var payload: [UInt8]
        var offset: Int64
        var position: LogPosition
    }

    var segmentIndex: Int
    /// Record types in order; samples take the next key/entry, others the next `Other`.
    var kinds: [UInt8] = []
    var keys: [UUIDBytes] = []
    var entries: [IndexEntry] = []
    var others: [Other] = []
    /// Set on the last chunk of its segment: where the segment's records end.
    var dataEnd: Int64?

    init(segmentIndex: Int) {
        self.segmentIndex = segmentIndex
        kinds.reserveCapacity(ReplayPipeline.chunkRecords)
        keys.reserveCapacity(ReplayPipeline.chunkRecords)
        entries.reserveCapacity(ReplayPipeline.chunkRecords)
    }
}

/// A bounded blocking queue between the reader and the applier.
final class ChunkQueue: @unchecked Sendable {
    enum Item: Sendable {
        case chunk(Chunk)
        case damage(segmentIndex: Int, offset: Int64, reason: String, mayBeTorn: Bool)
        case failed(Error)
        case finished
    }

    private let condition = NSCondition()
    private var items: [Item] = []
    private let depth: Int
    private var cancelled = false

    init(depth: Int) { self.depth = depth }

    /// Blocks while the queue is full. Returns false once cancelled.
    func put(_ item: Item) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while items.count >= depth && !cancelled { condition.wait() }
        if cancelled { return false }
        items.append(item)
        condition.broadcast()
        return true
    }

    func take() -> Item {
        condition.lock()
        defer { condition.unlock() }
        while items.isEmpty { condition.wait() }
        let item = items.removeFirst()
        condition.broadcast()
        return item
    }

    /// Wakes and stops the reader; later puts are dropped.
    func cancel() {
        condition.lock()
        cancelled = true
        items.removeAll()
        condition.broadcast()
        condition.unlock()
    }
}
