/// The header at the start of every segment file (layout in `FormatConstants`
/// and docs/FORMAT.md): 48 bytes in version 2, where the records start at
/// offset 4096; 40 bytes in version 1, where they follow at once.
public struct SegmentHeader: Hashable, Sendable {
    public var version: UInt16 = FormatConstants.formatVersion
    public var flags: UInt16 = 0
    public var sequence: UInt64
    /// Log position of the first byte of the file.
    public var basePosition: UInt64
    /// For compaction outputs, the highest sequence number this compaction replaces.
    public var compactedThrough: UInt64 = 0
    /// Version 2: the log position where the next segment starts when this one
    /// reserved a range of positions (0: the next starts where this one ends).
    /// Always 0 in version 1 and, so far, as written.
    public var rangeEnd: UInt64 = 0

    public init(sequence: UInt64, basePosition: UInt64, flags: UInt16 = 0, compactedThrough: UInt64 = 0,
                rangeEnd: UInt64 = 0, version: UInt16 = FormatConstants.formatVersion) {
        self.sequence = sequence
        self.basePosition = basePosition
        self.flags = flags
        self.compactedThrough = compactedThrough
        self.rangeEnd = rangeEnd
        self.version = version
    }

    public var isCompactionOutput: Bool { flags & FormatConstants.segmentFlagCompactionOutput != 0 }
    public var isCompactionFinal: Bool { flags & FormatConstants.segmentFlagCompactionFinal != 0 }
    /// A writer segment started past the sequences and positions reserved for
    /// a background compaction's outputs (`reservedAfter` is the last segment before them).
    public var isAfterReservation: Bool { flags & FormatConstants.segmentFlagAfterReservation != 0 }
    /// For a segment after a reservation: the sequence of the segment sealed
    /// when the reservation was made (kept in the compacted-through field).
    public var reservedAfter: UInt64 { isAfterReservation ? compactedThrough : 0 }

    /// Bytes of the header itself for this version.
    public var size: Int { Self.size(version: version) }

    /// Offset of the segment's first record: the one place that says where
    /// records start (4096 in version 2, 40 in version 1).
    public var dataStart: Int64 { Int64(version == 1 ? FormatConstants.segmentHeaderSizeV1 : FormatConstants.dataStartV2) }

    static func size(version: UInt16) -> Int {
        version == 1 ? FormatConstants.segmentHeaderSizeV1 : FormatConstants.segmentHeaderSize
    }

    /// The header bytes (40 or 48, by version).
    public func encoded() -> [UInt8] {
        let buffer = WriteBuffer(capacity: size)
        buffer.append(FormatConstants.segmentMagic)
        buffer.append(version)
        buffer.append(flags)
        buffer.append(sequence)
        buffer.append(basePosition)
        buffer.append(compactedThrough)
        if version != 1 { buffer.append(rangeEnd) }
        let crc = CRC32C.checksum(buffer.bytes)
        buffer.append(CRC32C.mask(crc))
        return Array(buffer.bytes)
    }

    /// The bytes a new segment file starts with: the header, then zeros up to
    /// `dataStart`.
    public func encodedBlock() -> [UInt8] {
        var bytes = encoded()
        bytes += [UInt8](repeating: 0, count: Int(dataStart) - bytes.count)
        return bytes
    }

    /// Why a header cannot be a live segment's: its bytes do not decode, or
    /// what they say cannot be true of the file or of the store.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case tooShort(Int)
        case badMagic
        case checksumMismatch
        case unsupportedVersion(UInt16)
        /// The header's sequence is not the one its file is named for.
        case sequenceMismatch(header: UInt64, fileName: UInt64)
        /// A sequence past `FormatConstants.maxSequence`: no segment could follow it.
        case sequenceAfterLast(UInt64)
        /// A segment numbered `maxSequence` that a writer continues in a new
        /// segment (an older version's, or one with a reserved range), which
        /// no number is left for.
        case sealedAtLastSequence(UInt64)
        /// Log positions past `FormatConstants.maxPosition`, what the index holds.
        case positionsBeyondIndex
        /// A reserved range that ends before the segment's records can begin
        /// (a compaction's output holds its header block at least).
        case rangeBeforeData(rangeEnd: UInt64, dataStart: UInt64)

        /// Offset of the header field at fault.
        public var offset: Int64 {
            switch self {
            case .tooShort, .badMagic, .checksumMismatch, .unsupportedVersion: 0
            case .sequenceMismatch, .sequenceAfterLast, .sealedAtLastSequence: Int64(FormatConstants.headerSequenceOffset)
            case .positionsBeyondIndex: Int64(FormatConstants.headerBasePositionOffset)
            case .rangeBeforeData: Int64(FormatConstants.headerRangeEndOffset)
            }
        }

        public var description: String {
            switch self {
            case .tooShort(let n): "segment header is incomplete (\(n) bytes)"
            case .badMagic: "not a StepLog segment (bad magic)"
            case .checksumMismatch: "segment header checksum mismatch"
            case .unsupportedVersion(let v):
                "segment format version \(v) is not supported (this build reads versions \(FormatConstants.readableVersions.lowerBound)–\(FormatConstants.readableVersions.upperBound))"
            case .sequenceMismatch(let header, let fileName): "header says sequence \(header) but the file is named for \(fileName)"
            case .sequenceAfterLast(let sequence): "sequence \(sequence) is the last there is: no segment can follow it"
            case .sealedAtLastSequence(let sequence): "segment numbered \(sequence) takes no more records and no segment can follow it"
            case .positionsBeyondIndex: "log positions reach past 2^46 (64 TiB), the most this version can index"
            case .rangeBeforeData(let rangeEnd, let dataStart):
                "segment reserves positions up to \(rangeEnd), before its records begin (\(dataStart))"
            }
        }
    }

    /// Whether a writer continues after this segment in a new one rather than
    /// appending to it: a segment of an older format version holds only that
    /// version's record types, and one with a reserved range (a compaction's
    /// output) is followed at the range's end.
    public var isSealed: Bool { version != FormatConstants.formatVersion || rangeEnd != 0 }

    /// Why this decoded header cannot be that of the live segment file named
    /// for `fileSequence`, holding `fileSize` bytes; nil when it can.
    public func problem(fileSequence: UInt64, fileSize: Int64) -> Problem? {
        if sequence != fileSequence { return .sequenceMismatch(header: sequence, fileName: fileSequence) }
        // No writer goes past maxSequence, and no segment could follow the
        // last number (a writer's open trapped on one; found by fuzzing).
        if sequence > FormatConstants.maxSequence { return .sequenceAfterLast(sequence) }
        // A writer continues an older version's store, or a segment with a
        // reserved range, in a new segment: none can follow this one (a writer
        // made the next, which no open accepted; found by fuzzing), so readers
        // refuse it as writers must.
        if isSealed && sequence >= FormatConstants.maxSequence {
            return .sealedAtLastSequence(sequence)
        }
        // A reserved range holds the segment's header block at least; one that
        // ends before it is damage (a writer that pads a short header block
        // would otherwise grow the segment past its range; found by fuzzing).
        if rangeEnd != 0, rangeEnd < basePosition || rangeEnd - basePosition < UInt64(dataStart) {
            return .rangeBeforeData(rangeEnd: rangeEnd, dataStart: basePosition &+ UInt64(dataStart))
        }
        // The index holds 46-bit positions: a store past them (64 TiB of
        // history) cannot be opened by this version.
        if basePosition > FormatConstants.maxPosition || UInt64(max(0, fileSize)) > FormatConstants.maxPosition - basePosition
            || rangeEnd > FormatConstants.maxPosition {
            return .positionsBeyondIndex
        }
        return nil
    }

    /// Decodes the header at the start of `bytes`.
    public static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, Problem> {
        guard bytes.count >= FormatConstants.segmentHeaderSizeV1 else { return .failure(.tooShort(bytes.count)) }
        for (i, m) in FormatConstants.segmentMagic.enumerated() where bytes[i] != m {
            return .failure(.badMagic)
        }
        var reader = ByteReader(bytes, offset: FormatConstants.headerVersionOffset)
        let version = reader.readUInt16()!
        let flags = reader.readUInt16()!
        let sequence = reader.readUInt64()!
        let base = reader.readUInt64()!
        let through = reader.readUInt64()!
        // The checksum's place depends on the version, which it also covers: an
        // unknown version is reported as such only when the version 2 layout's
        // checksum matches (a newer writer), else as damage.
        let layout: UInt16 = version == 1 ? 1 : 2
        let size = Self.size(version: layout)
        guard bytes.count >= size else { return .failure(.tooShort(bytes.count)) }
        let rangeEnd: UInt64 = layout == 1 ? 0 : reader.readUInt64()!
        let stored = reader.readUInt32()!
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<(size - 4)]))
        guard CRC32C.unmask(stored) == computed else { return .failure(.checksumMismatch) }
        guard FormatConstants.readableVersions.contains(version) else { return .failure(.unsupportedVersion(version)) }
        return .success(SegmentHeader(sequence: sequence, basePosition: base, flags: flags, compactedThrough: through,
                                      rangeEnd: rangeEnd, version: version))
    }
}
