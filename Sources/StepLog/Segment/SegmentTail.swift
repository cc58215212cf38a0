/// The rule that tells an unsynced tail from corruption, in one place (as
/// LevelDB's log reader keeps it): opening and `steplog verify` both ask it.
///
/// At the first damage at offset `d` of a segment:
/// - a sealed segment (not the newest), or a record whose checksum matched but
///   whose type or payload is not defined: **corruption**;
/// - the newest segment, version 2: an **unsynced tail** (bytes no sync
///   acknowledged: a writer died, a power loss tore them) unless a valid
///   `syncedThrough` record located after `d` claims an offset beyond `d` —
///   then bytes a sync made durable are damaged: **corruption**;
/// - the newest segment, version 1: an unsynced tail unless any valid record
///   exists after `d` (version 1 has no synced-through records).
public enum SegmentTail {
    public enum Verdict: Equatable, Sendable {
        /// Drop from `d`; `garbageEnd` is one past the last non-zero byte after
        /// `d` (what is reported as dropped; zeros after it were never data).
        case unsyncedTail(garbageEnd: Int64)
        /// Damage inside acknowledged bytes; `vouchedBy` is the offset of the
        /// record proving it (version 2: a synced-through record), when there is one.
        case corruption(vouchedBy: Int64?)
    }

    /// Judges damage at `offset` in `segment` (`fd` open on it). `checksummed`
    /// is true when a record's checksum matched but its type or shape did not.
    public static func classify(_ segment: SegmentInfo, fd: FileDescriptor, damageAt offset: Int64,
                                isNewest: Bool, checksummed: Bool) throws -> Verdict {
        guard isNewest, !checksummed else { return .corruption(vouchedBy: nil) }
        let vouching: Int64?
        if segment.header.version == 1 {
            vouching = try firstRecord(in: fd, after: offset, fileSize: segment.size,
                                       candidate: { type, _ in RecordType.isDefined(type, inVersion: 1) }) { type, payload in
                if case .success = RecordView.decode(type: type, payload: payload, version: 1) { return true }
                return false
            }
        } else {
            vouching = try firstRecord(in: fd, after: offset, fileSize: segment.size, candidate: SyncedThroughPayload.mayBe) { type, payload in
                (SyncedThroughPayload.claim(type: type, payload: payload) ?? 0) > UInt64(offset)
            }
        }
        if let vouching { return .corruption(vouchedBy: vouching) }
        let garbageEnd = (try SegmentReader.lastNonZeroByte(in: fd, from: offset, to: segment.size) ?? offset - 1) + 1
        return .unsyncedTail(garbageEnd: garbageEnd)
    }

    /// Offset of the first checksummed record starting in (`after`,
    /// `fileSize`) whose type and length `candidate` admits (checked before
    /// the checksum, so garbage lengths cost nothing) and `accept` takes, or
    /// nil. Reads the rest of the file in windows, trying every offset (after
    /// damage, lengths are not trusted); used only on the damaged path.
    static func firstRecord(in fd: FileDescriptor, after damageOffset: Int64, fileSize: Int64,
                            candidate admits: (UInt8, Int) -> Bool,
                            accept: (UInt8, UnsafeRawBufferPointer) -> Bool) throws -> Int64? {
        // A record's header holds a non-zero type byte, so no record starts
        // after the last non-zero byte: zero-filled space is skipped at once.
        guard let lastNonZero = try SegmentReader.lastNonZeroByte(in: fd, from: damageOffset + 1, to: fileSize) else { return nil }
        let candidatesEnd = lastNonZero + 1
        let chunk = 1 << 20
        let slack = 64 << 10
        var start = damageOffset + 1
        let buffer = WriteBuffer(capacity: Int(min(Int64(chunk + slack), max(64, fileSize - start))))
        while start < candidatesEnd {
            // Load a chunk plus enough slack to decode small records straddling its end.
            let load = Int(min(Int64(chunk + slack), fileSize - start))
            buffer.removeAll()
            buffer.reserve(load)
            buffer.count = try fd.read(into: buffer.storage, count: load, at: start)
            let bytes = buffer.bytes
            let limit = min(chunk, bytes.count, Int(candidatesEnd - start))
            for i in 0..<limit {
                guard let (type, length) = RecordFrame.declared(in: bytes, at: i) else { break }
                guard length <= FormatConstants.maxRecordPayload, admits(type, length),
                      start + Int64(i) + Int64(RecordFrame.size(payload: length)) <= fileSize else { continue }
                if i + RecordFrame.size(payload: length) > bytes.count {
                    // A large candidate straddling the chunk: read it on its own.
                    if try candidate(fd, at: start + Int64(i), length: length, accept: accept) { return start + Int64(i) }
                    continue
                }
                if case .record(let type, let payload, _) = RecordFrame.decode(bytes, at: i), accept(type, payload) {
                    return start + Int64(i)
                }
            }
            start += Int64(limit)
        }
        return nil
    }

    private static func candidate(_ fd: FileDescriptor, at offset: Int64, length: Int,
                                  accept: (UInt8, UnsafeRawBufferPointer) -> Bool) throws -> Bool {
        let size = RecordFrame.size(payload: length)
        let buffer = WriteBuffer(capacity: size)
        buffer.reserve(size)
        buffer.count = try fd.read(into: buffer.storage, count: size, at: offset)
        guard buffer.count == size, case .record(let type, let payload, _) = RecordFrame.decode(buffer.bytes, at: 0) else { return false }
        return accept(type, payload)
    }
}
