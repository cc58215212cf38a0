import Foundation
import StepLog

/// An in-memory server for tests (seed 002's `MockAPIClient`): idempotent by
/// sample id like the real one, with faults that can be scripted.
public final class InMemoryAPIClient: APIClient, @unchecked Sendable {
    /// What the next calls to `postSteps` do, consumed in order.
    public enum Fault: Sendable {
        /// An answer with that status and body (and Retry-After, in seconds).
        case status(Int, String, retryAfter: Double? = nil)
        case network
        /// Store the batch, then fail as if the answer was lost.
        case acceptThenNetwork
    }

    private let lock = NSLock()
    private var stored: [StepSampleDTO] = []
    private var latest: [String: StepSampleDTO] = [:]
    private var faults: [Fault] = []
    private var deletionFaults: [Fault] = []
    private var deletedIDs: [String] = []
    public private(set) var postCount = 0
    public private(set) var deletionPostCount = 0
    /// The contract this server enforces beyond the client's: a sample for
    /// which it returns a reason makes its whole batch a 400
    /// `{"error":"samples[i].<reason>"}`, nothing saved (as the real server
    /// names the first bad sample).
    private let rejects: (@Sendable (StepSample) -> String?)?

    public init(rejecting rejects: (@Sendable (StepSample) -> String?)? = nil) {
        self.rejects = rejects
    }

    public func inject(_ faults: [Fault]) { lock.withLock { self.faults += faults } }

    /// Faults for the next calls to `postDeletions` (`acceptThenNetwork` deletes, then fails).
    public func injectIntoDeletions(_ faults: [Fault]) { lock.withLock { deletionFaults += faults } }

    /// Every record written, in order (a changed sample appears again).
    public var records: [StepSampleDTO] { lock.withLock { stored } }

    /// The live samples by id (what `GET /steps` answers).
    public var live: [String: StepSampleDTO] { lock.withLock { latest } }

    /// Every deletion applied (an id that was live), in order.
    public var deletions: [String] { lock.withLock { deletedIDs } }

    public func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse {
        let fault: Fault? = lock.withLock {
            deletionPostCount += 1
            return deletionFaults.isEmpty ? nil : deletionFaults.removeFirst()
        }
        switch fault {
        case .status(let code, let message, let retryAfter)?: throw APIError.serverError(statusCode: code, message: message, retryAfter: retryAfter)
        case .network?: throw APIError.networkError(underlying: URLError(.timedOut))
        case .acceptThenNetwork?:
            _ = delete(ids)
            throw APIError.networkError(underlying: URLError(.networkConnectionLost))
        case nil:
            return DeletionResponse(deleted: delete(ids), message: "Success")
        }
    }

    private func delete(_ ids: [UUID]) -> Int {
        lock.withLock {
            var deleted = 0
            for id in ids.map(\.uuidString) where latest.removeValue(forKey: id) != nil {
                deletedIDs.append(id)
                deleted += 1
            }
            return deleted
        }
    }

    public func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        let fault: Fault? = lock.withLock {
            postCount += 1
            return faults.isEmpty ? nil : faults.removeFirst()
        }
        if fault == nil, let rejects {
            for (i, s) in samples.enumerated() {
                if let reason = rejects(s) {
                    throw APIError.serverError(statusCode: 400, message: "{\"error\":\"samples[\(i)].\(reason)\"}")
                }
            }
        }
        switch fault {
        case .status(let code, let message, let retryAfter)?: throw APIError.serverError(statusCode: code, message: message, retryAfter: retryAfter)
        case .network?: throw APIError.networkError(underlying: URLError(.timedOut))
        case .acceptThenNetwork?:
            _ = save(samples)
            throw APIError.networkError(underlying: URLError(.networkConnectionLost))
        case nil:
            return StepSampleResponse(saved: save(samples), message: samples.isEmpty ? "No samples provided" : "Success")
        }
    }

    private func save(_ samples: [StepSample]) -> Int {
        lock.withLock {
            var saved = 0
            for s in samples {
                let dto = StepSampleDTO(id: s.id.uuidString, startDate: ISO8601.format(milliseconds: s.startMilliseconds),
                                        endDate: ISO8601.format(milliseconds: s.endMilliseconds), count: s.count,
                                        sourceBundleId: s.sourceBundleId, sourceDeviceName: s.sourceDeviceName)
                if latest[dto.id] == dto { continue }
                latest[dto.id] = dto
                stored.append(dto)
                saved += 1
            }
            return saved
        }
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        lock.withLock {
            let page = stored.dropFirst(offset).prefix(limit)
            return StepSampleListResponse(samples: Array(page), total: stored.count)
        }
    }

    public func healthCheck() async throws -> Bool { true }
}
