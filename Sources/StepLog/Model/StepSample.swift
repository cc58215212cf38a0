import Foundation

/// One step-count sample as a source reports it: the content that identifies a
/// version. Two samples with the same UUID are "the same version" when every
/// field here but `origin` is equal; `fetchedAt` (kept by the store) is not
/// part of it either. `origin` is a label the store keeps beside the content.
///
/// Instants are kept as whole milliseconds since 1970-01-01T00:00:00Z, the
/// precision of the on-disk format; `Date` inputs are rounded to it. The step
/// count is kept in thousandths of a step (docs/FORMAT.md): an export's
/// `2741.7` is 2 741 700; a whole count `n` is `n × 1000`.
public struct StepSample: Hashable, Sendable {
    public var id: UUID
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    /// The count in thousandths of a step: the value every sum and comparison uses.
    public var countThousandths: Int64
    public var sourceBundleId: String
    public var sourceDeviceName: String?
    /// Which kind of source produced it (not content: see `SampleOrigin`).
    public var origin: SampleOrigin

    /// A sample of `countThousandths` thousandths of a step.
    public init(id: UUID, startMilliseconds: Int64, endMilliseconds: Int64, countThousandths: Int64,
                sourceBundleId: String, sourceDeviceName: String?, origin: SampleOrigin = .unspecified) {
        self.id = id
        self.startMilliseconds = startMilliseconds
        self.endMilliseconds = endMilliseconds
        self.countThousandths = countThousandths
        self.sourceBundleId = sourceBundleId
        self.sourceDeviceName = sourceDeviceName
        self.origin = origin
    }

    /// A sample of `count` whole steps.
    public init(id: UUID, startMilliseconds: Int64, endMilliseconds: Int64, count: Int,
                sourceBundleId: String, sourceDeviceName: String?, origin: SampleOrigin = .unspecified) {
        self.init(id: id, startMilliseconds: startMilliseconds, endMilliseconds: endMilliseconds,
                  countThousandths: Int64(count) &* 1000, sourceBundleId: sourceBundleId,
                  sourceDeviceName: sourceDeviceName, origin: origin)
    }

    public init(id: UUID, startDate: Date, endDate: Date, count: Int,
                sourceBundleId: String, sourceDeviceName: String?, origin: SampleOrigin = .unspecified) {
        self.init(id: id, startMilliseconds: Milliseconds.from(startDate),
                  endMilliseconds: Milliseconds.from(endDate), count: count,
                  sourceBundleId: sourceBundleId, sourceDeviceName: sourceDeviceName, origin: origin)
    }

    public var startDate: Date { Milliseconds.date(startMilliseconds) }
    public var endDate: Date { Milliseconds.date(endMilliseconds) }

    /// The whole steps of the count (its fraction dropped); setting it makes
    /// the count whole. Sums use `countThousandths`.
    public var count: Int {
        get { Int(countThousandths / 1000) }
        set { countThousandths = Int64(newValue) &* 1000 }
    }

    /// The thousandths past the whole steps, 0...999.
    public var countFraction: Int { Int(countThousandths % 1000) }

    /// The largest count a sample may hold, in thousandths: a whole part of 32 bits.
    public static let maxCountThousandths = Int64(UInt32.max) * 1000 + 999

    /// Why this sample cannot be stored, or nil when it can.
    public var validationProblem: String? {
        if id == UUID.nil { return "the nil UUID is not a valid sample id" }
        if endMilliseconds < startMilliseconds { return "endDate is before startDate" }
        if countThousandths < 0 || countThousandths > Self.maxCountThousandths {
            return "count \(StepCountText.format(thousandths: countThousandths)) is outside 0...\(UInt32.max).999"
        }
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
