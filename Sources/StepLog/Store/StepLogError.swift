#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every error the engine throws. Each case carries where it happened; the
/// one-line rendering for people is `description`, written in one place.
public enum StepLogError: Error, Equatable, CustomStringConvertible {
    /// A system call failed.
    case io(operation: String, path: String, errno: Int32)
    /// Another process holds the store's lock.
    case locked(path: String, pid: Int32?)
    /// The path exists but is not a StepLog store, or no store exists there.
    case notAStore(path: String, reason: String)
    /// Damage that is not a torn tail, at `offset` of the file at `path`
    /// (or at log position `offset` of the store at `path`, for damage found
    /// by following the index): what was found is `kind`.
    case corruption(path: String, offset: Int64, kind: CorruptionKind)
    /// A sample that cannot be stored (nil id, end before start, …).
    case invalidSample(id: String, reason: String)
    /// A write was attempted on a store opened read-only.
    case readOnly(path: String)
    /// The store was closed.
    case closed(path: String)
    /// A record to be written does not fit the format's limits.
    case recordTooLarge(bytes: Int)
    /// A source anchor longer than the format allows.
    case anchorTooLarge(family: String, bytes: Int)
    /// A destination that cannot be recorded (a name or URL too long).
    case invalidDestination(reason: String)
    /// A compaction in the background stopped without committing (its
    /// outputs are discarded; the store is unchanged).
    case compactionAbandoned(path: String, reason: String)
    /// The next segment would be numbered past `FormatConstants.maxSequence`
    /// (only a store whose numbers were set by hand gets there).
    case sequencesExhausted(path: String)

    /// What kind of damage a `.corruption` error found.
    public enum CorruptionKind: Equatable, Sendable, CustomStringConvertible {
        /// The bytes stop being a record: a bad checksum, an impossible
        /// length, a record cut short (not the newest segment's unsynced tail).
        case damage(SegmentDamage)
        /// Such damage in bytes a sync made durable: the synced-through
        /// record at offset `vouchedBy` claims them.
        case damageInSyncedBytes(SegmentDamage, vouchedBy: Int64)
        /// A record whose checksum matched but whose type the segment's
        /// version does not define, or whose payload is not its type's shape.
        case malformedRecord(PayloadProblem)
        /// A segment header that cannot be read, or cannot be a live segment's.
        case segmentHeader(SegmentHeader.Problem)
        /// The live segments do not follow each other.
        case chain(SegmentChainBreak)
        /// The index names a log position no segment holds.
        case noSegmentHolds(position: UInt64)
        /// The index names a record that is not the sample version or
        /// tombstone it says (`found`: the type code there; nil: past the end).
        case indexPointsElsewhere(found: UInt8?, expected: IndexTarget)
        /// An index snapshot's entries out of hash order.
        case snapshotEntriesOutOfOrder
        /// An index snapshot entry of the nil UUID, which no writer indexes.
        case snapshotEntryNilUUID(entry: Int)
        /// An index snapshot entry pointing inside its segment's header.
        case snapshotEntryInHeader(entry: Int, offset: UInt64)

        /// What an index entry is expected to point at.
        public enum IndexTarget: Equatable, Sendable {
            case sampleOrTombstone, sample, tombstone
        }

        public var description: String {
            switch self {
            case .damage(let damage):
                return damage.description
            case .damageInSyncedBytes(let damage, let vouchedBy):
                return "\(damage), in bytes a sync made durable (synced-through record at \(vouchedBy))"
            case .malformedRecord(let problem):
                return problem.description
            case .segmentHeader(let problem):
                return problem.description
            case .chain(let problem):
                return problem.description
            case .noSegmentHolds(let position):
                return "no segment holds log position \(position)"
            case .indexPointsElsewhere(let found, let expected):
                let what = found.map { "a record of type \($0)" } ?? "the end of the segment"
                switch expected {
                case .sampleOrTombstone: return "the index points at \(what), not a sample or tombstone"
                case .sample: return "the index points at \(what), not a sample"
                case .tombstone: return "the index points at \(what), not a tombstone"
                }
            case .snapshotEntriesOutOfOrder:
                return "snapshot entries are not in hash order"
            case .snapshotEntryNilUUID(let entry):
                return "snapshot entry \(entry) holds the nil UUID"
            case .snapshotEntryInHeader(let entry, let offset):
                return "snapshot entry \(entry) points at offset \(offset), inside the segment's header"
            }
        }
    }

    public var description: String {
        switch self {
        case .io(let operation, let path, let code):
            // A full disk is the one I/O error a user can fix: say so first.
            let prefix = code == ENOSPC ? "disk full: " : ""
            return "\(prefix)\(operation) \(path): \(String(cString: strerror(code))) (errno \(code))"
        case .locked(let path, let pid):
            if let pid { return "store is locked by pid \(pid) (\(path))" }
            return "store is locked by another process (\(path))"
        case .notAStore(let path, let reason):
            return "\(path) is not a StepLog store: \(reason)"
        case .corruption(let path, let offset, let kind):
            return "corruption in \(path) at offset \(offset): \(kind)"
        case .invalidSample(let id, let reason):
            return "invalid sample \(id): \(reason)"
        case .readOnly(let path):
            return "store \(path) is open read-only"
        case .closed(let path):
            return "store \(path) is closed"
        case .recordTooLarge(let bytes):
            return "record of \(bytes) bytes exceeds the format's limit of \(FormatConstants.maxRecordPayload) bytes"
        case .anchorTooLarge(let family, let bytes):
            return "source anchor of \(bytes) bytes for '\(family)' exceeds the format's limit of \(FormatConstants.maxAnchorBytes) bytes"
        case .invalidDestination(let reason):
            return "cannot record the destination: \(reason)"
        case .compactionAbandoned(let path, let reason):
            return "compaction of \(path) abandoned: \(reason)"
        case .sequencesExhausted(let path):
            return "cannot create \(path): segment sequence numbers end at \(FormatConstants.maxSequence)"
        }
    }
}
