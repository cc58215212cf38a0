// Every on-disk constant of the StepLog format, in one place.
// docs/FORMAT.md is the prose specification; the golden-vector tests pin the bytes.
// Never renumber, never reuse a retired value.

/// Constants of the segment file format (version 1).
public enum FormatConstants {
    // MARK: Segment files

    /// First 8 bytes of every segment file: ASCII "STEPLOG" followed by a NUL byte.
    public static let segmentMagic: [UInt8] = [0x53, 0x54, 0x45, 0x50, 0x4C, 0x4F, 0x47, 0x00]
    /// The only format version this code writes and reads.
    public static let formatVersion: UInt16 = 1
    /// Size of the segment header in bytes.
    public static let segmentHeaderSize = 40
    /// Extension of segment files. Names are the sequence number, zero-padded to
    /// `segmentNameDigits` digits: `000000000001.log`.
    public static let segmentExtension = "log"
    public static let segmentNameDigits = 12
    /// Default size at which the writer seals a segment and starts the next one.
    public static let defaultSegmentSize = 64 << 20

    // Segment header layout (little-endian):
    //   0  magic              8 bytes
    //   8  version            u16
    //  10  flags              u16   (segmentFlag*)
    //  12  sequence           u64
    //  20  base position      u64   (log position of byte 0 of this file)
    //  28  compacted through  u64   (compaction outputs: replaces segments with sequence <= this; else 0)
    //  36  header checksum    u32   (masked CRC-32C of bytes 0..<36)
    static let headerVersionOffset = 8
    static let headerFlagsOffset = 10
    static let headerSequenceOffset = 12
    static let headerBasePositionOffset = 20
    static let headerCompactedThroughOffset = 28
    static let headerChecksumOffset = 36

    /// Header flag: this segment was written by compaction.
    public static let segmentFlagCompactionOutput: UInt16 = 1 << 0
    /// Header flag: the last segment of a compaction run; its presence under its
    /// final name is the commit point of that compaction.
    public static let segmentFlagCompactionFinal: UInt16 = 1 << 1

    // MARK: Records

    /// Record frame: payload length (u32) + type (u8) + masked CRC-32C of type and payload (u32).
    public static let recordHeaderSize = 9
    /// Largest payload a record may carry; a larger length field is "impossible".
    public static let maxRecordPayload = 16 << 20
    /// Log positions are 47-bit unsigned integers (128 TiB of history).
    public static let maxPosition: UInt64 = (1 << 47) - 1

    /// Constant added by the checksum mask (LevelDB's `kMaskDelta`).
    public static let checksumMaskDelta: UInt32 = 0xA282_EAD8

    // MARK: Payload details

    /// Sample upsert flag: a device name follows the bundle id.
    public static let sampleFlagHasDeviceName: UInt8 = 1 << 0
    /// Sample upsert flag: this version is already acknowledged by the server
    /// (written by compaction, which folds `samplesSynced` into the sample).
    public static let sampleFlagSynced: UInt8 = 1 << 1
    /// Fixed part of a sample upsert payload, before the strings.
    static let samplePayloadFixedSize = 16 + 8 + 8 + 4 + 8 + 1 + 2
    /// Longest UTF-8 string a sample may carry (bundle id, device name).
    public static let maxStringBytes = Int(UInt16.max)

    // MARK: Files beside the segments

    /// Lock file: held with flock(2) by the one writer; holds "pid N".
    public static let lockFileName = "LOCK"
    /// Suffix of files being written that are not yet part of the store.
    public static let temporarySuffix = ".tmp"
    /// Index snapshot ("hint") file of a sealed segment: same number, this extension.
    public static let snapshotExtension = "hint"

    // MARK: Index snapshots (see docs/FORMAT.md, "Index snapshots")

    /// First 8 bytes of a snapshot file: ASCII "STEPHINT".
    public static let snapshotMagic: [UInt8] = [0x53, 0x54, 0x45, 0x50, 0x48, 0x49, 0x4E, 0x54]
    public static let snapshotVersion: UInt16 = 1
    public static let snapshotHeaderSize = 72
    /// Bytes at the end of a segment whose checksum ties a snapshot to it.
    public static let snapshotTailBytes = 4096
    /// Snapshot sample entry: uuid (16) + offset u32 + flags u8.
    public static let snapshotEntrySize = 21
    /// Snapshot entry flag: the segment holds a version of this sample, at `offset`.
    public static let snapshotEntryHasVersion: UInt8 = 1 << 0
    /// Snapshot entry flag: after the segment, that version (or, without a
    /// version, the version current before the segment) is synced.
    public static let snapshotEntrySynced: UInt8 = 1 << 1
}

/// The record type codes. Stored as one byte; 0 is never valid, so zero-filled
/// space is never mistaken for a record.
public enum RecordType: UInt8, Sendable, CaseIterable {
    /// A version of a sample (upsert by UUID).
    case sampleUpsert = 1
    /// The UUIDs of an upload batch the server acknowledged.
    case samplesSynced = 2
    /// The latest status of one layering interval.
    case intervalStatus = 3
    /// Every interval and layering range before this record is forgotten.
    case intervalsCleared = 4
    /// A range the layering stage set out to cover (its tree's root).
    case layeringRange = 5
    /// The highest step count seen for one local calendar day (the ratchet).
    case dailyHighScore = 6
}
