import Foundation

/// Where one layering interval stands. Raw values are the on-disk codes.
public enum IntervalStatus: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Discovered with steps in it; raw samples not yet fetched.
    case pending = 1
    /// Discovered with no steps; nothing to fetch.
    case empty = 2
    /// Raw samples are durable in the store.
    case fetched = 3
    /// Every sample of the interval is acknowledged by the server.
    case synced = 4

    public var description: String {
        switch self {
        case .pending: "pending"
        case .empty: "empty"
        case .fetched: "fetched"
        case .synced: "synced"
        }
    }

    public init?(name: String) {
        guard let found = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = found
    }
}

/// A half-open time range [start, end) of the layering with its aggregate step
/// count and status (the seeds' `SyncInterval`).
public struct SyncInterval: Hashable, Sendable {
    public var id: UUID
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    public var stepCount: Int64
    public var status: IntervalStatus

    public init(id: UUID, startMilliseconds: Int64, endMilliseconds: Int64, stepCount: Int64, status: IntervalStatus) {
        self.id = id
        self.startMilliseconds = startMilliseconds
        self.endMilliseconds = endMilliseconds
        self.stepCount = stepCount
        self.status = status
    }

    public var startDate: Date { Milliseconds.date(startMilliseconds) }
    public var endDate: Date { Milliseconds.date(endMilliseconds) }

    /// True when `milliseconds` falls in [start, end).
    public func contains(_ milliseconds: Int64) -> Bool {
        milliseconds >= startMilliseconds && milliseconds < endMilliseconds
    }
}

/// A range the layering set out to cover: the root of one layering tree,
/// with a fingerprint of the source it was layered from.
public struct LayeringRange: Hashable, Sendable {
    public var startMilliseconds: Int64
    public var endMilliseconds: Int64
    /// 64-bit fingerprint of the source's identity (0 when unknown).
    public var sourceFingerprint: UInt64

    public init(startMilliseconds: Int64, endMilliseconds: Int64, sourceFingerprint: UInt64 = 0) {
        self.startMilliseconds = startMilliseconds
        self.endMilliseconds = endMilliseconds
        self.sourceFingerprint = sourceFingerprint
    }

    /// FNV-1a over the identity's UTF-8 bytes: stable across runs and platforms
    /// (unlike `Hasher`, which is seeded per process).
    public static func fingerprint(_ identity: String) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for b in identity.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        return h
    }
}
