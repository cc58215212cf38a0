/// The record type codes. Stored as one byte; 0 and every code not listed
/// are corruption, so zero-filled space is never mistaken for a record.
public enum RecordType: UInt8, Sendable, CaseIterable {
    /// A version of a sample (upsert by UUID).
    case sampleUpsert = 1
    /// The UUIDs of a batch the server acknowledged: each one's current version
    /// (a sample becomes synced; a tombstone is done and the UUID leaves the index).
    /// Version 1 called it "samples synced".
    case samplesAcknowledged = 2
    /// The latest status of one layering interval.
    case intervalStatus = 3
    /// Every interval and layering range before this record is forgotten.
    case intervalsCleared = 4
    /// A range the layering stage set out to cover (its tree's root).
    case layeringRange = 5
    /// The highest step count seen for one local calendar day (the ratchet).
    case dailyHighScore = 6
    /// A sample was deleted at its source: a tombstone, pending until acknowledged. (Version 2.)
    case sampleDeleted = 7
    /// The offset of this segment up to which the writer's last sync made it durable. (Version 2.)
    case syncedThrough = 8
    /// Zero bytes that make the next append start on a sector boundary. (Version 2.)
    case padding = 9
    /// A provider's state after its last completed ingest, per source family. (Version 2.)
    case sourceAnchor = 10
    /// Samples the server refused for a reason of their own (a 400 naming the
    /// sample), each with the server's reason: the version current at this
    /// point of the log is not sent again. (Version 2, added after the others:
    /// earlier version 2 readers refuse it as an undefined type.)
    case samplesRejected = 11
    /// Where the store uploads (server id, user, URL, its uploader id) and when
    /// the server was last proven to hold what the store acknowledged; the
    /// synced flags mean "acknowledged by the latest destination". (Version 2,
    /// added after the others, as 11.)
    case destination = 12
    /// Samples whose acknowledgement the server turned out not to hold: the
    /// version current at this point of the log is unsynced again (the payload
    /// of `samplesRejected`; an entry with a reason is also rejected with it).
    /// (Version 2, added after the others, as 11.)
    case samplesUnacknowledged = 13

    /// The first format version that has this record type.
    public var sinceVersion: UInt16 { rawValue <= 6 ? 1 : 2 }

    /// The type's name in payload problems ("sample-upsert payload of 12 bytes is malformed").
    var payloadName: String {
        switch self {
        case .sampleUpsert: "sample-upsert"
        case .samplesAcknowledged: "samples-acknowledged"
        case .intervalStatus: "interval-status"
        case .intervalsCleared: "intervals-cleared"
        case .layeringRange: "layering-range"
        case .dailyHighScore: "daily-high-score"
        case .sampleDeleted: "sample-deleted"
        case .syncedThrough: "synced-through"
        case .padding: "padding"
        case .sourceAnchor: "source-anchor"
        case .samplesRejected: "samples-rejected"
        case .destination: "destination"
        case .samplesUnacknowledged: "samples-unacknowledged"
        }
    }

    /// True when a segment of `version` may hold a record of `rawType`.
    @inline(__always)
    public static func isDefined(_ rawType: UInt8, inVersion version: UInt16) -> Bool {
        guard let type = RecordType(rawValue: rawType) else { return false }
        return type.sinceVersion <= version
    }
}
