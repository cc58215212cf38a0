import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Appends records to the newest segment. Records are encoded into `pending`
/// and reach the file on `flush` (one pwrite) and stable storage on `sync`.
///
/// A background queue keeps zero-filled, synced space ahead of the write
/// offset (`Preallocator`), so the writer's own syncs flush data only. The
/// format says where data ends: at the first offset from which every byte is
/// zero. `seal` and `close` trim the zeros, so only a writer that died leaves
/// them behind.
///
/// A sync that acknowledges work (`syncAndVouch`) leaves a `syncedThrough`
/// record due: the next append writes it first, naming the offset that sync
/// made durable, so that opening can tell damage in acknowledged bytes
/// (corruption) from an unsynced tail. Before such a sync the store may pad
/// the segment to a sector boundary (`padToSector`), so that no later write
/// shares a sector with acknowledged bytes.
final class SegmentWriter {
    private(set) var info: SegmentInfo
    var fd: FileDescriptor
    /// Encoded records not yet written to the file. Starts small and grows to
    /// the store's `writeBufferSize` as appends need it: a writer that only
    /// opens and closes (a small store's `status`, the fuzzer's opens) then
    /// never maps a 1 MiB buffer.
    let pending = WriteBuffer(capacity: 64 << 10)
    /// File size known to be on stable storage.
    private(set) var syncedSize: Int64
    /// A sync acknowledged `syncedSize` and no record has followed it yet:
    /// the next append writes a `syncedThrough` record first.
    private(set) var syncedThroughDue = false
    /// The segment size the store rolls at.
    let limit: Int64
    /// The segment's size when this writer opened it: a clean close adds a
    /// closing `syncedThrough` record only if this run appended something.
    private var sizeAtOpen: Int64
    /// Syncs this file too (its zero fills): a sync of the writer's is
    /// complete only once this one reports no failure (`syncFile`).
    let preallocator: Preallocator?

    private init(info: SegmentInfo, fd: FileDescriptor, syncedSize: Int64, physicalSize: Int64,
                 preallocation: Int, limit: Int64) {
        self.info = info
        self.fd = fd
        self.syncedSize = syncedSize
        self.limit = limit
        sizeAtOpen = info.size
        preallocator = preallocation > 0
            ? Preallocator(fd: fd, preparedEnd: physicalSize, ahead: Int64(preallocation), limit: limit) : nil
        preallocator?.extendIfNeeded(writeOffset: info.size)
    }

    /// Creates a segment file holding only its header block, durably: the
    /// file is written under a temporary name, synced, renamed, and the
    /// directory synced. (A version 2 header has its first 4 KiB to itself.)
    static func create(directory: String, header: SegmentHeader, preallocation: Int, limit: Int64) throws -> SegmentWriter {
        let name = SegmentName.fileName(sequence: header.sequence)
        let path = Directory.join(directory, name)
        guard header.sequence <= FormatConstants.maxSequence else { throw StepLogError.sequencesExhausted(path: path) }
        let temporary = path + FormatConstants.temporarySuffix
        let bytes = header.encodedBlock()
        let tmp = try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC)
        do {
            try bytes.withUnsafeBytes { try tmp.write($0, at: 0) }
            try tmp.sync()
        } catch {
            tmp.close()
            throw error
        }
        tmp.close()
        try Directory.rename(temporary, to: path)
        try Directory.sync(directory)
        let fd = try FileDescriptor.open(path, O_RDWR)
        let size = Int64(bytes.count)
        return SegmentWriter(info: SegmentInfo(header: header, path: path, size: size), fd: fd, syncedSize: size,
                             physicalSize: size, preallocation: preallocation, limit: limit)
    }

    /// Opens an existing segment to append after its last record (`info.size`,
    /// which may be before zero-filled space left by a writer that died).
    ///
    /// Bytes after the last offset a `syncedThrough` record vouches for may
    /// never have reached the disk even though they read back: after a failed
    /// fsync Linux marks the dirty pages clean without writing them
    /// ("fsyncgate"), so the page cache serves bytes the disk does not hold,
    /// and no later fdatasync writes them. They are therefore re-written from
    /// what was read and synced here, before anything new is appended; the
    /// first append then vouches for them (a `syncedThrough` record is due).
    static func reopen(_ info: SegmentInfo, preallocation: Int, limit: Int64) throws -> SegmentWriter {
        precondition(info.header.version == FormatConstants.formatVersion, "a writer never appends to a version \(info.header.version) segment")
        let fd = try FileDescriptor.open(info.path, O_RDWR)
        let unvouched: Bool
        do {
            let vouched = try lastVouchedOffset(info, fd: fd)
            unvouched = vouched < info.size
            if unvouched { try rewrite(fd, from: vouched, to: info.size) }
        } catch {
            fd.close()
            throw error
        }
        let writer = SegmentWriter(info: info, fd: fd, syncedSize: info.size, physicalSize: try fd.size(),
                                   preallocation: preallocation, limit: limit)
        writer.syncedThroughDue = unvouched
        return writer
    }

    /// The highest offset a `syncedThrough` record in the segment's first
    /// `info.size` bytes claims, or the data start when there is none (the
    /// header block is synced before the segment gets its name).
    static func lastVouchedOffset(_ info: SegmentInfo, fd: FileDescriptor) throws -> Int64 {
        var vouched = info.dataStart
        var reader = SegmentReader(fd: fd, fileSize: info.size, from: info.dataStart)
        while let item = try reader.next() {
            guard case .record(_, let type, let payload, _) = item else { break }
            if let claim = SyncedThroughPayload.claim(type: type, payload: payload) {
                // No claim vouches for more than the file holds; a forged one
                // past Int64.max trapped here (found by fuzzing `store-open`).
                vouched = max(vouched, Int64(min(claim, UInt64(info.size))))
            }
        }
        return min(vouched, info.size)
    }

    /// Writes bytes [start, end) of the file again, as read, and syncs them:
    /// the pages become dirty, so this sync writes them whatever an earlier
    /// failed sync did to them.
    private static func rewrite(_ fd: FileDescriptor, from start: Int64, to end: Int64) throws {
        let chunk = 1 << 20
        let buffer = WriteBuffer(capacity: Int(min(Int64(chunk), end - start)))
        var at = start
        while at < end {
            let want = Int(min(Int64(chunk), end - at))
            buffer.removeAll()
            buffer.reserve(want)
            buffer.count = try fd.read(into: buffer.storage, count: want, at: at)
            guard buffer.count == want else { throw StepLogError.io(operation: "read", path: fd.path, errno: EIO) }
            try fd.write(buffer.bytes, at: at)
            at += Int64(want)
        }
        try fd.sync()
    }

    /// Offset in the file where the next record will start.
    var endOffset: Int64 { info.size + Int64(pending.count) }
    var endPosition: UInt64 { info.basePosition + UInt64(endOffset) }
    var hasRecords: Bool { endOffset > info.dataStart }
    /// True when bytes were appended since the last sync.
    var hasUnsyncedBytes: Bool { pending.count > 0 || syncedSize != info.size }

    static let syncedThroughRecordSize = Int64(SyncedThroughPayload.frameSize)

    /// Call before appending a record: writes the `syncedThrough` record a
    /// sync left due. Returns false when it does not fit before `limit` (the
    /// caller rolls to a new segment, where nothing is due).
    @inline(__always)
    func beginAppend() -> Bool {
        guard syncedThroughDue else { return true }
        guard endOffset + Self.syncedThroughRecordSize <= limit else { return false }
        appendSyncedThrough()
        return true
    }

    private func appendSyncedThrough() {
        SyncedThroughPayload.append(offset: UInt64(syncedSize), to: pending)
        syncedThroughDue = false
    }

    /// Appends a padding record so that the next append starts on a sector
    /// boundary (a gap under a record header's 9 bytes takes a sector more).
    /// Returns false, appending nothing, when the padding would cross `limit`.
    func padToSector() -> Bool {
        let gap = PaddingPayload.frameSize(aligning: endOffset)
        if gap == 0 { return true }
        guard endOffset + gap <= limit else { return false }
        PaddingPayload.append(frameSize: gap, to: pending)
        return true
    }

    /// Writes `pending` to the file.
    func flush() throws {
        guard pending.count > 0 else { return }
        preallocator?.waitIfFilling(before: info.size + Int64(pending.count))
        try fd.write(pending.bytes, at: info.size)
        info.size += Int64(pending.count)
        pending.removeAll()
        preallocator?.extendIfNeeded(writeOffset: info.size)
    }

    /// Writes `pending` and makes the whole file durable.
    func sync() throws {
        try flush()
        if syncedSize != info.size {
            try Self.syncFile(fd, preallocator)
            syncedSize = info.size
        }
    }

    /// fdatasync of the file, as the writer's own sync or on the store's
    /// sync thread (`BackgroundSyncer`).
    static func syncFile(_ fd: FileDescriptor, _ preallocator: Preallocator?) throws {
        try fd.sync()
        // The preallocator syncs this file too: had its sync failed, the
        // kernel may have reported the error to it alone and dropped our
        // pages, and the sync above returned 0 — so its failure is ours.
        try preallocator?.throwIfSyncFailed()
    }

    /// A sync made on another thread (`BackgroundSyncer`) made the file's
    /// first `size` bytes durable and acknowledged them: a `syncedThrough`
    /// record naming `size` is due.
    func noteSynced(size: Int64) {
        guard size > syncedSize else { return }
        syncedSize = size
        syncedThroughDue = true
    }

    /// A sync whose durability is acknowledged to a caller: afterwards a
    /// `syncedThrough` record is due (see `beginAppend`).
    func syncAndVouch() throws {
        guard hasUnsyncedBytes else { return }
        try sync()
        syncedThroughDue = true
    }

    /// A clean close's last record: the `syncedThrough` record a sync left
    /// due, written and synced, so that every byte before it is vouched for.
    func vouchBeforeClosing() throws {
        // A run that appended nothing leaves the file as it found it (its
        // unvouched bytes were re-written and synced at open).
        guard syncedThroughDue, info.size > sizeAtOpen, endOffset + Self.syncedThroughRecordSize <= limit else { return }
        appendSyncedThrough()
        try sync()
    }

    /// Makes the segment final: everything written and synced, zero-filled
    /// space trimmed (durably), so a sealed segment's size is its data.
    func seal() throws {
        try sync()
        syncedThroughDue = false
        try trimZeroFill()
    }

    /// Stops preallocating and trims zero-filled space (clean shutdown).
    func trimZeroFill() throws {
        guard let preallocator else { return }
        preallocator.stop()
        if preallocator.preparedEnd > info.size {
            try fd.truncate(to: info.size)
            try fd.sync()
        }
    }

    /// Waits for a running fill and starts no more (the file keeps its zeros).
    func stopPreallocating() { preallocator?.stop() }

    func close() {
        preallocator?.stop()
        fd.close()
    }
}
