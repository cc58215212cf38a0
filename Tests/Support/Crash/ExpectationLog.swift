import Foundation
import StepLog

/// What a workload meant each sample to become, in order, and which of it
/// was acknowledged: the checker's oracle.
///
/// A workload notes a sample's intended state *before* the call that makes
/// it (so a call that failed half-way still left a state the checker
/// accepts), and marks an acknowledgement after a call that made it durable
/// returned success. A crash state must then hold, for every sample noted
/// before the last acknowledgement, the state it had at that
/// acknowledgement or any state noted after it (a later write may or may not
/// have reached the disk).
public final class ExpectationLog: @unchecked Sendable {
    public enum State: Hashable, Sendable, CustomStringConvertible {
        case live(count: Int, synced: Bool)
        case deletionPending
        case absent
        public var description: String {
            switch self {
            case .live(let count, let synced): return "live(\(count)\(synced ? ", synced" : ""))"
            case .deletionPending: return "deletion pending"
            case .absent: return "absent"
            }
        }
    }

    /// An acknowledgement: everything noted up to `sequence` is durable, and
    /// the store holds at least `ranges` layering ranges.
    public struct Mark: Hashable, Sendable {
        public var sequence: Int
        public var ranges: Int
    }

    private let lock = NSLock()
    private var history: [UUID: [(sequence: Int, state: State)]] = [:]
    private var sequence = 0
    public private(set) var lastMark: Mark?

    public init() {}

    public func note(_ id: UUID, _ state: State) {
        lock.withLock {
            sequence += 1
            history[id, default: []].append((sequence, state))
        }
    }

    public func mark(ranges: Int) -> Mark {
        lock.withLock {
            let mark = Mark(sequence: sequence, ranges: ranges)
            lastMark = mark
            return mark
        }
    }

    /// A mark for what a sync running now covers (`syncInBackground`):
    /// everything noted so far. It becomes the last mark only once that sync
    /// is waited for (`settle`).
    public func pendingMark(ranges: Int) -> Mark {
        lock.withLock { Mark(sequence: sequence, ranges: ranges) }
    }

    /// The pending mark's sync returned: it is the acknowledgement in force.
    public func settle(_ mark: Mark) -> Mark {
        lock.withLock {
            lastMark = mark
            return mark
        }
    }

    /// Every sample the mark constrains, with the states it may be found in.
    public func constraints(at mark: Mark) -> [(UUID, Set<State>)] {
        lock.withLock {
            var result: [(UUID, Set<State>)] = []
            for (id, entries) in history {
                guard let current = entries.lastIndex(where: { $0.sequence <= mark.sequence }) else { continue }
                result.append((id, Set(entries[current...].map(\.state))))
            }
            return result
        }
    }

    /// The state a store holds for `id`, in the log's terms.
    public static func state(of id: UUID, in store: StepLogStore) throws -> State {
        switch try store.sampleState(id: id) {
        case .live(let stored): return .live(count: stored.sample.count, synced: stored.isSynced)
        case .deletionPending: return .deletionPending
        case .absent: return .absent
        }
    }
}
