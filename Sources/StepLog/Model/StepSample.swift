import Foundation

/// One step-count sample as a source reports it: the content that identifies a
/// version. Two samples with the same UUID are "the same version" when every
/// field here but `origin` is equal; `fetchedAt` (kept by the store) is not
/// part of it either. `origin` is a label the store keeps beside the content.
///
/// Instants are kept as whole milliseconds since 1970-01-01T00:00:00Z, the
/// precision of the on-disk format; `Date` inputs are rounded to it.
public struct StepSample: Hashable, Sendable {
    public var id: UUID
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    public var count: Int
    public var sourceBundleId: String
    public var sourceDeviceName: String?
    /// Which kind of source produced it (not content: see `SampleOrigin`).
    public var origin: SampleOrigin

    public init(id: UUID, startMilliseconds: Int64, endMilliseconds: Int64, count: Int,
                sourceBundleId: String, sourceDeviceName: String?, origin: SampleOrigin = .unspecified) {
        self.id = id
        self.startMilliseconds = startMilliseconds
        self.endMilliseconds = endMilliseconds
        self.count = count
        self.sourceBundleId = sourceBundleId
        self.sourceDeviceName = sourceDeviceName
        self.origin = origin
    }

    public init(id: UUID, startDate: Date, endDate: Date, count: Int,
                sourceBundleId: String, sourceDeviceName: String?, origin: SampleOrigin = .unspecified) {
        self.init(id: id, startMilliseconds: Milliseconds.from(startDate),
                  endMilliseconds: Milliseconds.from(endDate), count: count,
                  sourceBundleId: sourceBundleId, sourceDeviceName: sourceDeviceName, origin: origin)
    }

    public var startDate: Date { Milliseconds.date(startMilliseconds) }
    public var endDate: Date { Milliseconds.date(endMilliseconds) }

    /// Why this sample cannot be stored, or nil when it can.
    public var validationProblem: String? {
        if id == UUID.nil { return "the nil UUID is not a valid sample id" }
        if endMilliseconds < startMilliseconds { return "endDate is before startDate" }
        if count < 0 || count > Int(UInt32.max) { return "count \(count) is outside 0...\(UInt32.max)" }
        if sourceBundleId.utf8.count > FormatConstants.maxStringBytes {
            return "sourceBundleId is longer than \(FormatConstants.maxStringBytes) bytes"
        }
        if let name = sourceDeviceName, name.utf8.count > FormatConstants.maxStringBytes {
            return "sourceDeviceName is longer than \(FormatConstants.maxStringBytes) bytes"
        }
        return nil
    }
}

/// A sample as the store holds it: the content, when it was fetched, whether the
/// server acknowledged this version, and where the version lives in the log.
public struct StoredSample: Hashable, Sendable {
    public var sample: StepSample
    public var fetchedAtMilliseconds: Int64
    public var isSynced: Bool
    /// Log position of this version's record; identifies the version.
    public var position: LogPosition

    public init(sample: StepSample, fetchedAtMilliseconds: Int64, isSynced: Bool, position: LogPosition) {
        self.sample = sample
        self.fetchedAtMilliseconds = fetchedAtMilliseconds
        self.isSynced = isSynced
        self.position = position
    }

    public var id: UUID { sample.id }
    public var fetchedAt: Date { Milliseconds.date(fetchedAtMilliseconds) }
}

/// Conversions between `Date` and the format's whole milliseconds since 1970.
public enum Milliseconds {
    public static func from(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    public static func date(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}

extension UUID {
    /// 00000000-0000-0000-0000-000000000000: never a valid sample id (it marks
    /// empty slots in the index).
    public static let `nil` = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
}
