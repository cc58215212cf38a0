import Foundation
import StepLog

/// The kinds of source a store's samples came from: the built-in mock
/// (labeled `.mock`, or unlabeled with the mock's bundle id
/// `com.apple.health.mock`, as a store written before origins were recorded
/// holds them) or a real one (an export, HealthKit, any other bundle).
///
/// From the counts of live samples by origin the store's index keeps
/// (`StepLogStore.samplesByOrigin`), which follow every version written,
/// replaced and deleted, so they are right whatever wrote the store: an older
/// version, a run killed midway, a store mixed before mixing was refused.
/// Only unlabeled samples (a store from before origins) are told apart by
/// reading them.
public struct StoreSourceKinds: Equatable, Sendable {
    public var mockSamples: Int
    public var realSamples: Int

    public init(mockSamples: Int, realSamples: Int) {
        self.mockSamples = mockSamples
        self.realSamples = realSamples
    }

    /// Mock samples beside real ones: the mistake `stepsync forget --source mock` mends.
    public var isMixed: Bool { mockSamples > 0 && realSamples > 0 }

    /// The bundle id of the mock's samples, its iPhone's and its Watch's.
    public static let mockBundleId = MockPhoneStream.bundleId
    static let mockBundle = Array(mockBundleId.utf8)

    public static func isMock(_ span: SampleSpan) -> Bool {
        span.origin == .mock || (span.origin == .unspecified && span.sourceBundleId.elementsEqual(mockBundle))
    }

    public static func isMock(_ sample: StepSample) -> Bool {
        sample.origin == .mock || (sample.origin == .unspecified && sample.sourceBundleId == mockBundleId)
    }

    /// Counts the store's live samples by kind: from the store's counts by
    /// origin when every sample is labeled; otherwise the unlabeled ones are
    /// read (`unlabeledMock`).
    public static func of(_ store: StepLogStore) throws -> StoreSourceKinds {
        let byOrigin = store.samplesByOrigin
        var mock = byOrigin[.mock]
        if byOrigin[.unspecified] > 0 { mock += try unlabeledMock(store, unlabeled: byOrigin[.unspecified]) }
        return StoreSourceKinds(mockSamples: mock, realSamples: byOrigin.total - mock)
    }

    /// How many of the `unlabeled` live samples (origin unspecified) are the
    /// mock's. One pass over the sample records without index lookups (two
    /// threads) answers when no unlabeled record, current or not, is of one
    /// kind, or when every record is a live sample's current version;
    /// otherwise (samples rewritten or deleted) a second pass reads the
    /// current versions.
    static func unlabeledMock(_ store: StepLogStore, unlabeled: Int) throws -> Int {
        let parts = 2
        let tally = Tally(parts: parts)
        let read = try store.forEachSampleRecordSpan(parts: parts) { p, span in tally.add(span, part: p) }
        let records = tally.total
        if records.mock == 0 { return 0 }
        if records.real == 0 { return unlabeled }
        if read.records == read.liveSamples { return records.mock }
        let current = Tally(parts: parts)
        try store.forEachSampleSpan(parts: parts) { p, span in current.add(span, part: p) }
        return current.total.mock
    }

    /// Unlabeled records counted per part, one object each: a part is counted
    /// by the one thread that reads it.
    private final class Tally: @unchecked Sendable {
        private let parts: [PartCount]

        init(parts: Int) { self.parts = (0..<parts).map { _ in PartCount() } }

        func add(_ span: SampleSpan, part: Int) {
            guard span.origin == .unspecified else { return }
            if StoreSourceKinds.isMock(span) { parts[part].mock += 1 } else { parts[part].real += 1 }
        }

        var total: (mock: Int, real: Int) { (parts.reduce(0) { $0 + $1.mock }, parts.reduce(0) { $0 + $1.real }) }
    }

    private final class PartCount: @unchecked Sendable {
        var mock = 0
        var real = 0
    }
}
