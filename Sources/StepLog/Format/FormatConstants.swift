// Every on-disk constant of the StepLog format, in one place.
// docs/FORMAT.md is the prose specification; the golden-vector tests pin the bytes.
// Never renumber, never reuse a retired value.

/// Constants of the segment file format (version 3; versions 1 and 2 are still read).
public enum FormatConstants {
    // MARK: Segment files

    /// First 8 bytes of every segment file: ASCII "STEPLOG" followed by a NUL byte.
    public static let segmentMagic: [UInt8] = [0x53, 0x54, 0x45, 0x50, 0x4C, 0x4F, 0x47, 0x00]
    /// The version this code writes.
    public static let formatVersion: UInt16 = 3
    /// Every version this code reads.
    public static let readableVersions: ClosedRange<UInt16> = 1...3
    /// The first version whose sample upserts may carry a count's fraction.
    public static let countFractionSinceVersion: UInt16 = 3
    /// Size of a version 2 segment header in bytes (zeros follow it up to `dataStartV2`).
    public static let segmentHeaderSize = 48
    /// Size of a version 1 segment header; its records follow it at once.
    public static let segmentHeaderSizeV1 = 40
    /// Where a version 2 segment's records start: the header has the first
    /// 4 KiB (a page, eight sectors) to itself, written once and never shared
    /// with an append, so a torn append cannot take the header with it.
    public static let dataStartV2 = 4096
    /// Extension of segment files. Names are the sequence number, zero-padded to
    /// `segmentNameDigits` digits: `000000000001.log`.
    public static let segmentExtension = "log"
    public static let segmentNameDigits = 12
    /// Default size at which the writer seals a segment and starts the next one.
    public static let defaultSegmentSize = 64 << 20

    // Segment header layout (little-endian):
    //   0  magic              8 bytes
    //   8  version            u16   (1, 2 or 3)
    //  10  flags              u16   (segmentFlag*)
    //  12  sequence           u64
    //  20  base position      u64   (log position of byte 0 of this file)
    //  28  compacted through  u64   (compaction outputs: replaces segments with sequence <= this; else 0)
    // version 1:
    //  36  header checksum    u32   (masked CRC-32C of bytes 0..<36)
    // versions 2 and 3:
    //  36  range end          u64   (log position where the next segment starts; 0: where this one ends)
    //  44  header checksum    u32   (masked CRC-32C of bytes 0..<44)
    static let headerVersionOffset = 8
    static let headerFlagsOffset = 10
    static let headerSequenceOffset = 12
    static let headerBasePositionOffset = 20
    static let headerCompactedThroughOffset = 28
    static let headerRangeEndOffset = 36
    static let headerChecksumOffsetV1 = 36
    static let headerChecksumOffset = 44

    /// Header flag: this segment was written by compaction.
    public static let segmentFlagCompactionOutput: UInt16 = 1 << 0
    /// Header flag: the last segment of a compaction run; its presence under its
    /// final name is the commit point of that compaction.
    public static let segmentFlagCompactionFinal: UInt16 = 1 << 1
    /// Header flag: a writer segment started while a compaction ran in the
    /// background. Its sequence and base position lie past the numbers and
    /// positions reserved for that compaction's outputs, and its
    /// compacted-through field names the last segment before the reservation.
    public static let segmentFlagAfterReservation: UInt16 = 1 << 2

    // MARK: Records

    /// Record frame: payload length (u32) + type (u8) + masked CRC-32C of type and payload (u32).
    public static let recordHeaderSize = 9
    /// Largest payload a record may carry; a larger length field is "impossible".
    public static let maxRecordPayload = 16 << 20
    /// Log positions the index can hold: 46 bits (64 TiB of history). Opening
    /// a store with a position beyond it is an error (version 1 allowed 47 bits
    /// in the format, but no store comes near either).
    public static let maxPosition: UInt64 = (1 << 46) - 1
    /// The greatest sequence number a segment may carry. Open refuses a
    /// segment numbered past it, and no writer or compaction creates one past
    /// it; so every store that opens can be opened by a writer and opens again
    /// after (a version 1 last segment numbered this is refused too, since a
    /// writer continues such a store in a new segment).
    public static let maxSequence: UInt64 = .max - 1

    /// Constant added by the checksum mask (LevelDB's `kMaskDelta`).
    public static let checksumMaskDelta: UInt32 = 0xA282_EAD8

    /// The sector size padding aligns to: after a padded sync, the next append
    /// starts on a multiple of this, so no later write shares a sector with
    /// acknowledged bytes (see docs/FORMAT.md, "What is assumed of the disk").
    public static let paddingSector = 512

    // MARK: Payload details

    /// Sample upsert flag: a device name follows the bundle id.
    public static let sampleFlagHasDeviceName: UInt8 = 1 << 0
    /// Sample upsert flag: this version is already acknowledged by the server
    /// (written by compaction, which folds `samplesAcknowledged` into the sample,
    /// and by a relabelling upsert, which keeps the synced state).
    public static let sampleFlagSynced: UInt8 = 1 << 1
    /// Sample upsert flags bits 2...3: the sample's origin (`SampleOrigin`).
    public static let sampleOriginShift: UInt8 = 2
    public static let sampleOriginMask: UInt8 = 0b11 << 2
    /// Sample upsert flag (version 3): the count has a fraction, a u16 of
    /// thousandths (1...999) after the strings; without it the count is whole.
    public static let sampleFlagHasCountFraction: UInt8 = 1 << 4
    /// Fixed part of a sample upsert payload, before the strings.
    static let samplePayloadFixedSize = 16 + 8 + 8 + 4 + 8 + 1 + 2
    /// Longest UTF-8 string a sample may carry (bundle id, device name).
    public static let maxStringBytes = Int(UInt16.max)
    /// Payload of a `sampleDeleted` record: uuid[16] deletedAt i64.
    public static let tombstonePayloadSize = 24
    /// Payload of a `syncedThrough` record: offset u64.
    public static let syncedThroughPayloadSize = 8
    /// Longest anchor a `sourceAnchor` record carries.
    public static let maxAnchorBytes = 65_536
    /// Longest reason (UTF-8 bytes) a `samplesRejected` entry carries; a longer
    /// one is cut at a character boundary.
    public static let maxRejectionReasonBytes = 1_024
    /// A destination's server id and user are at most this many UTF-8 bytes (u8 lengths).
    public static let maxDestinationNameBytes = 255
    /// A destination's URL is at most this many UTF-8 bytes.
    public static let maxDestinationURLBytes = 2_048

    // MARK: Files beside the segments

    /// Lock file: held with flock(2) by the one writer; holds "pid N".
    public static let lockFileName = "LOCK"
    /// Suffix of files being written that are not yet part of the store.
    public static let temporarySuffix = ".tmp"
    /// Index snapshot ("hint") file of a sealed segment: same number, this extension.
    public static let snapshotExtension = "hint"

    // MARK: Index snapshots (see docs/IMPL.md, "Index snapshots")

    /// First 8 bytes of a snapshot file: ASCII "STEPHINT".
    public static let snapshotMagic: [UInt8] = [0x53, 0x54, 0x45, 0x50, 0x48, 0x49, 0x4E, 0x54]
    /// The snapshot version this code writes and reads; other versions are
    /// ignored (and rebuilt by a writer). Version 3 added the origin bits of
    /// an entry's flags; a version 2 entry has none, so it is never read as one.
    public static let snapshotVersion: UInt16 = 3
    public static let snapshotHeaderSize = 72
    /// Bytes at the end of a segment whose checksum ties a snapshot to it.
    public static let snapshotTailBytes = 4096
    /// Snapshot sample entry: uuid (16) + offset u32 + flags u8.
    public static let snapshotEntrySize = 21
    /// Snapshot entry flag: the segment holds a version of this sample, at `offset`.
    public static let snapshotEntryHasVersion: UInt8 = 1 << 0
    /// Snapshot entry flag: after the segment, that version (or, without a
    /// version, the version current before the segment) is acknowledged.
    public static let snapshotEntrySynced: UInt8 = 1 << 1
    /// Snapshot entry flag: the version at `offset` is a tombstone.
    public static let snapshotEntryTombstone: UInt8 = 1 << 2
    /// Snapshot entry flag: the key is absent after the segment (its
    /// tombstone was acknowledged).
    public static let snapshotEntryRemoved: UInt8 = 1 << 3
    /// Snapshot entry flag: without a version in the segment, the version
    /// current before it lost its acknowledgement in it (a samples-unacknowledged record).
    public static let snapshotEntryUnsynced: UInt8 = 1 << 4
    /// Snapshot entry flags bits 5...6 (version 3): with a sample version at
    /// `offset`, that version's origin (`SampleOrigin`, as in the record's flags).
    public static let snapshotEntryOriginShift: UInt8 = 5
    public static let snapshotEntryOriginMask: UInt8 = 0b11 << 5
}
