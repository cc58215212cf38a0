#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What opening does at the first damage replay finds: drop an unsynced tail,
/// refuse corruption in one line, or salvage the prefix before it and set
/// the rest aside (docs/FORMAT.md, "Recovery", step 4).
extension StoreOpener {
    enum ReplayOutcome { case tornTail(Int64), salvaged(Int64) }

    func damaged(_ segment: SegmentInfo, fd: FileDescriptor, offset: Int64, kind: StepLogError.CorruptionKind,
                         isNewest: Bool, report: inout OpenReport) throws -> ReplayOutcome {
        // Only where the bytes stop being records may they be a torn write;
        // a record whose checksum matched is what was written.
        let torn: SegmentDamage?
        if case .damage(let damage) = kind { torn = damage } else { torn = nil }
        let verdict = try SegmentTail.classify(segment, fd: fd, damageAt: offset, isNewest: isNewest, checksummed: torn == nil)
        if case .unsyncedTail(let garbageEnd) = verdict {
            // Zero-filled space after the unsynced bytes was never data.
            if !options.readOnly {
                let writable = try FileDescriptor.open(segment.path, O_RDWR)
                defer { writable.close() }
                try writable.truncate(to: offset)
                try writable.sync()
            }
            report.tornTail = OpenReport.TornTail(segment: segment.path, offset: offset, bytesDropped: garbageEnd - offset)
            return .tornTail(offset)
        }
        guard options.salvage else {
            if case .corruption(let vouchedBy?) = verdict, segment.header.version != 1, let torn {
                throw StepLogError.corruption(path: segment.path, offset: offset, kind: .damageInSyncedBytes(torn, vouchedBy: vouchedBy))
            }
            throw StepLogError.corruption(path: segment.path, offset: offset, kind: kind)
        }
        let later = try laterSegments(than: segment)
        let setAside = try self.setAside(from: (segment, offset), segments: later)
        if !options.readOnly {
            let writable = try FileDescriptor.open(segment.path, O_RDWR)
            defer { writable.close() }
            try writable.truncate(to: offset)
            try writable.sync()
            try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: segment.sequence)))
            for s in later {
                try Directory.remove(Directory.join(directory, SegmentName.snapshotFileName(sequence: s.sequence)))
                try Directory.remove(s.path)
            }
            try Directory.sync(directory)
        }
        report.salvage = OpenReport.Salvage(segment: segment.path, offset: offset, reason: kind.description,
                                            bytesDropped: segment.size - offset + later.reduce(0) { $0 + $1.size },
                                            segmentsDropped: later.count, setAsidePath: setAside)
        return .salvaged(offset)
    }

    func laterSegments(than segment: SegmentInfo) throws -> [SegmentInfo] {
        // Re-read the listing so the set-aside is exactly what is on disk.
        var result: [SegmentInfo] = []
        for name in try Directory.names(in: directory) {
            guard let sequence = SegmentName.sequence(of: name), sequence > segment.sequence else { continue }
            let path = Directory.join(directory, name)
            let fd = try FileDescriptor.open(path, O_RDONLY)
            defer { fd.close() }
            result.append(SegmentInfo(header: SegmentHeader(sequence: sequence, basePosition: 0), path: path, size: try fd.size()))
        }
        return result.sorted { $0.sequence < $1.sequence }
    }

    /// Copies what salvage drops into one file next to the store
    /// (`<store>.salvage-<sequence>-<offset>.bin`): the damaged segment's bytes
    /// from the damage on, then each later segment whole. Returns its path, or
    /// nil for read-only opens (which write nothing).
    func setAside(from start: (segment: SegmentInfo, offset: Int64)?, segments: [SegmentInfo]) throws -> String? {
        guard !options.readOnly else { return nil }
        let first = start?.segment ?? segments.first
        guard let first else { return nil }
        let trimmed = directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        var path = "\(trimmed).salvage-\(first.sequence)-\(start?.offset ?? 0).bin"
        var n = 1
        while Directory.kind(of: path) != nil { path = "\(trimmed).salvage-\(first.sequence)-\(start?.offset ?? 0)-\(n).bin"; n += 1 }
        let out = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL)
        defer { out.close() }
        var written: Int64 = 0
        let buffer = WriteBuffer(capacity: 1 << 20)
        func copy(_ s: SegmentInfo, from offset: Int64) throws {
            let fd = try FileDescriptor.open(s.path, O_RDONLY)
            defer { fd.close() }
            var at = offset
            while at < s.size {
                buffer.removeAll()
                buffer.reserve(1 << 20)
                let n = try fd.read(into: buffer.storage, count: Int(min(Int64(1 << 20), s.size - at)), at: at)
                if n == 0 { break }
                buffer.count = n
                try out.write(buffer.bytes, at: written)
                written += Int64(n)
                at += Int64(n)
            }
        }
        if let start { try copy(start.segment, from: start.offset) }
        for s in segments { try copy(s, from: 0) }
        try out.sync()
        try Directory.sync(Directory.parentPath(of: path))
        return path
    }
}
