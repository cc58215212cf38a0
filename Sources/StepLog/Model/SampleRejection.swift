import Foundation

/// The server's refusal of one sample version: which sample, when, and the
/// server's reason (`endDate: must not be before startDate (…)`). It
/// applies to the version current when it was recorded; a new version of the
/// sample (changed content) is not rejected until the server refuses it too.
public struct SampleRejection: Hashable, Sendable {
    public var id: UUID
    public var rejectedAtMilliseconds: Int64
    public var reason: String

    public init(id: UUID, rejectedAtMilliseconds: Int64, reason: String) {
        self.id = id
        self.rejectedAtMilliseconds = rejectedAtMilliseconds
        self.reason = reason
    }

    public var rejectedAt: Date { Milliseconds.date(rejectedAtMilliseconds) }
}
