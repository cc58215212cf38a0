import Foundation

/// A sample version's fields read in place from its record: no `String`, no
/// `UUID`, no allocation. The byte views are valid only during the call.
public struct SampleSpan {
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    public var count: UInt32
    /// UTF-8 bytes of `sourceBundleId`.
    public var sourceBundleId: UnsafeRawBufferPointer
    /// UTF-8 bytes of `sourceDeviceName`; nil when the sample has none.
    public var sourceDeviceName: UnsafeRawBufferPointer?
}

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
        try locked {
            var queue = SpanQueue(index: state.index)
            defer { queue.deallocate() }
            try scan(from: .zero) { position, type, payload in
                guard type == RecordType.sampleUpsert.rawValue else { return true }
                guard SamplePayload.isWellFormed(payload) else {
                    throw StepLogError.corruption(path: directory, offset: Int64(position.rawValue),
                                                  reason: "sample-upsert payload of \(payload.count) bytes is malformed")
                }
                if queue.isFull { try queue.emitOldest(body) }
                queue.add(payload, at: position)
                return true
            }
            while !queue.isEmpty { try queue.emitOldest(body) }
        }
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

    mutating func add(_ payload: UnsafeRawBufferPointer, at position: LogPosition) {
        if payload.count > slotSize { grow(to: payload.count) }
        let slot = (head + waiting) % Self.depth
        let key = SamplePayload.uuid(payload)
        index.prefetch(key)
        (keys + slot).initialize(to: key)
        (positions + slot).initialize(to: position)
        lengths[slot] = payload.count
        (storage + slot * slotSize).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
        waiting += 1
    }

    /// Looks the oldest record up and passes it on if it is its sample's current version.
    mutating func emitOldest(_ body: (SampleSpan) throws -> Void) throws {
        let slot = head
        head = (head + 1) % Self.depth
        waiting -= 1
        guard let entry = index.find(keys[slot]), entry.position == positions[slot] else { return }
        let payload = UnsafeRawBufferPointer(start: storage + slot * slotSize, count: lengths[slot])
        let bundleAt = FormatConstants.samplePayloadFixedSize
        let bundleLength = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: SamplePayload.bundleLengthOffset, as: UInt16.self)))
        var device: UnsafeRawBufferPointer?
        if payload[SamplePayload.flagsOffset] & FormatConstants.sampleFlagHasDeviceName != 0 {
            let deviceAt = bundleAt + bundleLength
            let deviceLength = Int(UInt16(littleEndian: payload.loadUnaligned(fromByteOffset: deviceAt, as: UInt16.self)))
            device = UnsafeRawBufferPointer(rebasing: payload[(deviceAt + 2)..<(deviceAt + 2 + deviceLength)])
        }
        try body(SampleSpan(
            startMilliseconds: Int64(littleEndian: payload.loadUnaligned(fromByteOffset: SamplePayload.startOffset, as: Int64.self)),
            endMilliseconds: Int64(littleEndian: payload.loadUnaligned(fromByteOffset: SamplePayload.endOffset, as: Int64.self)),
            count: UInt32(littleEndian: payload.loadUnaligned(fromByteOffset: SamplePayload.countOffset, as: UInt32.self)),
            sourceBundleId: UnsafeRawBufferPointer(rebasing: payload[bundleAt..<(bundleAt + bundleLength)]),
            sourceDeviceName: device))
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
