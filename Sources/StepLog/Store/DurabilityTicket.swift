/// What `StepLogStore.syncInBackground()` hands back: the log position up to
/// which that sync makes records durable. `waitUntilDurable` returns once a
/// sync covering it succeeded, and throws if one failed first.
public struct DurabilityTicket: Sendable, Hashable, Comparable {
    /// End of the records the sync covers (a log position).
    public let position: UInt64

    init(position: UInt64) { self.position = position }

    public static func < (a: DurabilityTicket, b: DurabilityTicket) -> Bool { a.position < b.position }
}
