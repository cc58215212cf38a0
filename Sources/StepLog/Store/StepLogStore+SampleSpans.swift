import Foundation

extension StepLogStore {
    /// `forEachSample` for passes over millions of samples (daily totals):
    /// the current version of every sample, in log order, as a `SampleSpan`.
    ///
    /// Telling the current version from older ones takes an index lookup per
    /// record, a cache miss in a table of hundreds of megabytes; here the
    /// lookups run `SpanQueue.depth` records behind the scan, each slot
    /// prefetched when its record is read, so the misses overlap instead of
    /// queueing. Records waiting for their lookup are copied (a few KiB).
    public func forEachSampleSpan(_ body: (SampleSpan) throws -> Void) throws {
        try locked { try scanSpans(try segmentsToScan()[...]) { sample, _ in try body(sample.span) } }
    }

    /// `forEachSampleSpan` with the segments split into up to `parts` runs of
    /// about equal size, read at once, one thread each: `body` gets the run's
    /// number and is called concurrently for different runs (it must keep
    /// each run's results apart); within a run, spans come in log order, and
    /// run p holds log positions before run p + 1's. The store stays locked
    /// throughout (the index is only read).
    public func forEachSampleSpan(parts: Int, _ body: @Sendable (Int, SampleSpan) throws -> Void) throws {
        try forEachSampleVersion(parts: parts) { run, sample, _ in try body(run, sample.span) }
    }

    /// `forEachSampleSpan(parts:)` giving each current version's payload (a
    /// view, valid during the call) and whether it is acknowledged: for
    /// passes that read more than the span (the reconcile's content hashes).
    public func forEachSampleVersion(parts: Int, _ body: @Sendable (Int, SamplePayload, _ synced: Bool) throws -> Void) throws {
        try locked {
            let files = try segmentsToScan()
            let runs = Self.runs(of: files, parts: max(1, parts))
            guard runs.count > 1 else {
                try scanSpans(files[...]) { try body(0, $0, $1) }
                return
            }
            let firstError = FirstError()
            DispatchQueue.concurrentPerform(iterations: runs.count) { run in
                do { try self.scanSpans(files[runs[run]]) { try body(run, $0, $1) } } catch { firstError.record(error) }
            }
            if let error = firstError.first { throw error }
        }
    }

    /// Every sample-upsert record in log order, current version or not, with
    /// no index lookups, in up to `parts` runs read at once as
    /// `forEachSampleSpan(parts:)` does. Returns how many records there were
    /// and how many live samples the store holds, both under one lock.
    ///
    /// When the two are equal, the records were exactly the current versions
    /// of the live samples (each live sample has one current record among
    /// them, and no record is left over), so the spans are what
    /// `forEachSampleSpan` gives, for a fraction of its cost. Otherwise some
    /// were older versions or deleted samples: the caller throws its results
    /// away and uses `forEachSampleSpan`. A store whose samples were never
    /// rewritten or deleted is the common case (ingest writes a sample again
    /// only when the source changed it).
    public func forEachSampleRecordSpan(parts: Int, _ body: @Sendable (Int, SampleSpan) throws -> Void) throws -> (records: Int, liveSamples: Int) {
        try locked {
            let files = try segmentsToScan()
            let live = state.sampleCount
            let runs = Self.runs(of: files, parts: max(1, parts))
            guard runs.count > 1 else {
                return (try scanRecordSpans(files[...]) { try body(0, $0) }, live)
            }
            let firstError = FirstError()
            let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: runs.count)
            defer { counts.deallocate() }
            counts.initialize(repeating: 0)
            nonisolated(unsafe) let shared = counts // each run writes its own element
            DispatchQueue.concurrentPerform(iterations: runs.count) { run in
                do { shared[run] = try self.scanRecordSpans(files[runs[run]]) { try body(run, $0) } } catch { firstError.record(error) }
            }
            if let error = firstError.first { throw error }
            return (counts.reduce(0, +), live)
        }
    }

    /// The spans of every sample record in `files`; returns how many.
    private func scanRecordSpans(_ files: ArraySlice<SegmentInfo>, _ body: (SampleSpan) throws -> Void) throws -> Int {
        var records = 0
        try forEachSampleRecord(in: files) { _, sample in
            records += 1
            try body(sample.span)
        }
        return records
    }

    /// Every sample version in `files`, in log order, with its log position;
    /// damage or a malformed record is a corruption error. The one segment
    /// walk both span scans share.
    private func forEachSampleRecord(in files: ArraySlice<SegmentInfo>,
                                     _ body: (LogPosition, SamplePayload) throws -> Void) throws {
        for info in files {
            guard info.dataStart < info.size else { continue }
            let fd = try FileDescriptor.open(info.path, O_RDONLY)
            defer { fd.close() }
            fd.adviseSequential()
            var reader = SegmentReader(fd: fd, fileSize: info.size, from: info.dataStart)
            while let step = try reader.nextRecord(version: info.header.version) {
                switch step {
                case .record(let record, let offset, _):
                    guard case .sampleUpsert(let sample) = record else { continue }
                    try body(LogPosition(info.basePosition + UInt64(offset)), sample)
                case .malformed(let offset, let problem):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .malformedRecord(problem))
                case .damage(let offset, let damage):
                    throw StepLogError.corruption(path: info.path, offset: offset, kind: .damage(damage))
                }
            }
        }
    }

    /// The segments as they stand, the writer's pending records written out first.
    private func segmentsToScan() throws -> [SegmentInfo] {
        if let w = writer, failure == nil { do { try w.flush() } catch { throw fail(error) } }
        var files = segments
        if let w = writer, !files.isEmpty { files[files.count - 1] = w.info }
        return files
    }

    /// Consecutive segments in up to `parts` runs of about equal bytes.
    static func runs(of files: [SegmentInfo], parts: Int) -> [Range<Int>] {
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        var runs: [Range<Int>] = []
        var start = 0, bytes: Int64 = 0
        for (i, file) in files.enumerated() {
            bytes += file.size
            if bytes * Int64(parts) >= total * Int64(runs.count + 1) && runs.count < parts - 1 {
                runs.append(start..<(i + 1))
                start = i + 1
            }
        }
        if start < files.count { runs.append(start..<files.count) }
        return runs
    }

    /// The sample records in `files` that are current versions (checked against
    /// the index), with whether each is acknowledged.
    private func scanSpans(_ files: ArraySlice<SegmentInfo>, _ body: (SamplePayload, Bool) throws -> Void) throws {
        var queue = SpanQueue(index: state.index)
        defer { queue.deallocate() }
        try forEachSampleRecord(in: files) { position, sample in
            if queue.isFull { try queue.emitOldest(body) }
            queue.add(sample, at: position)
        }
        while !queue.isEmpty { try queue.emitOldest(body) }
    }
}

/// The records `forEachSampleSpan` has read and not yet looked up, oldest
/// first, their payloads copied into one buffer of `depth` slots. A struct of
/// raw buffers, kept in a local variable: the hot path pays for no
/// reference counting or dynamic exclusivity checks.
private struct SpanQueue {
    static let depth = 16
    private let index: SampleIndex
    private let keys = UnsafeMutablePointer<UUIDBytes>.allocate(capacity: depth)
    private let positions = UnsafeMutablePointer<LogPosition>.allocate(capacity: depth)
    private let lengths = UnsafeMutablePointer<Int>.allocate(capacity: depth)
    private var slotSize = 512
    private var storage: UnsafeMutableRawPointer
    private var head = 0
    private var waiting = 0

    init(index: SampleIndex) {
        self.index = index
        storage = .allocate(byteCount: Self.depth * slotSize, alignment: 16)
        lengths.initialize(repeating: 0, count: Self.depth)
    }

    func deallocate() {
        keys.deallocate()
        positions.deallocate()
        lengths.deallocate()
        storage.deallocate()
    }

    var isFull: Bool { waiting == Self.depth }
    var isEmpty: Bool { waiting == 0 }

    mutating func add(_ sample: SamplePayload, at position: LogPosition) {
        let payload = sample.bytes
        if payload.count > slotSize { grow(to: payload.count) }
        let slot = (head + waiting) % Self.depth
        let key = sample.uuid
        index.prefetch(key)
        (keys + slot).initialize(to: key)
        (positions + slot).initialize(to: position)
        lengths[slot] = payload.count
        (storage + slot * slotSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        waiting += 1
    }

    /// Looks the oldest record up and passes it on if it is its sample's
    /// current version, with whether that version is acknowledged.
    mutating func emitOldest(_ body: (SamplePayload, Bool) throws -> Void) throws {
        let slot = head
        head = (head + 1) % Self.depth
        waiting -= 1
        guard let entry = index.entry(keys[slot], at: positions[slot]) else { return }
        try body(SamplePayload(wellFormed: UnsafeRawBufferPointer(start: storage + slot * slotSize, count: lengths[slot])), entry.isSynced)
    }

    /// Larger slots for a larger payload (long source names), keeping the waiting ones.
    private mutating func grow(to size: Int) {
        var newSize = slotSize
        while newSize < size { newSize *= 2 }
        let newStorage = UnsafeMutableRawPointer.allocate(byteCount: Self.depth * newSize, alignment: 16)
        for slot in 0..<Self.depth where lengths[slot] > 0 {
            (newStorage + slot * newSize).copyMemory(from: storage + slot * slotSize, byteCount: lengths[slot])
        }
        storage.deallocate()
        storage = newStorage
        slotSize = newSize
    }
}
