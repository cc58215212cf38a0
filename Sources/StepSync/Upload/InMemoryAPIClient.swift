import Foundation
import StepLog

/// An in-memory server for tests (seed 002's `MockAPIClient`): idempotent by
/// sample id like the real one, keeping who wrote each sample and deletion
/// and answering the digest routes as the real one does (docs/RECONCILE.md),
/// with faults that can be scripted. Clients made with `sharing(uploader:)`
/// are other stores of the same user on the same server.
public final class InMemoryAPIClient: APIClient, @unchecked Sendable {
    /// What the next calls to `postSteps` do, consumed in order.
    public enum Fault: Sendable {
        /// An answer with that status and body (and Retry-After, in seconds).
        case status(Int, String, retryAfter: Double? = nil)
        case network
        /// Store the batch, then fail as if the answer was lost.
        case acceptThenNetwork
    }

    /// A live sample at the server: its content and who last wrote it.
    public struct Held: Hashable, Sendable {
        public var sample: StepSample
        public var uploader: String
    }

    /// What the server holds, shared by the clients of one server.
    final class Server: @unchecked Sendable {
        let lock = NSLock()
        var serverId = UUID().uuidString
        var stored: [StepSampleDTO] = []
        var latest: [String: Held] = [:]
        /// The uploader of each id's latest deletion (its last word, until it is posted again).
        var deletedBy: [String: String] = [:]
        var deletedIDs: [String] = []
    }

    private let server: Server
    private let lock = NSLock()
    private var faults: [Fault] = []
    private var deletionFaults: [Fault] = []
    public let uploader: String?
    public let user: String
    public private(set) var postCount = 0
    public private(set) var deletionPostCount = 0
    /// Digest requests answered (`digest`, `dayDigests`, `daySamples`, `lookup`).
    public private(set) var digestRequests = 0
    /// The contract this server enforces beyond the client's: a sample for
    /// which it returns a reason makes its whole batch a 400
    /// `{"error":"samples[i].<reason>"}`, nothing saved (as the real server
    /// names the first bad sample).
    private let rejects: (@Sendable (StepSample) -> String?)?
    /// Samples a page of `daySamples` holds (the real server's is 10,000).
    public var pageSize = 10_000
    /// False: a server from before reconciliation, whose `GET /steps/digest` is a 404.
    public var offersDigests = true

    public init(uploader: String? = nil, user: String = "local", rejecting rejects: (@Sendable (StepSample) -> String?)? = nil) {
        self.server = Server()
        self.uploader = uploader
        self.user = user
        self.rejects = rejects
    }

    private init(server: Server, uploader: String?, user: String, rejects: (@Sendable (StepSample) -> String?)?) {
        self.server = server
        self.uploader = uploader
        self.user = user
        self.rejects = rejects
    }

    /// Another client of the same server and user, writing as `uploader` (a second store).
    public func sharing(uploader: String?) -> InMemoryAPIClient {
        InMemoryAPIClient(server: server, uploader: uploader, user: user, rejects: rejects)
    }

    public func inject(_ faults: [Fault]) { lock.withLock { self.faults += faults } }

    /// Faults for the next calls to `postDeletions` (`acceptThenNetwork` deletes, then fails).
    public func injectIntoDeletions(_ faults: [Fault]) { lock.withLock { deletionFaults += faults } }

    /// Every record written, in order (a changed sample appears again).
    public var records: [StepSampleDTO] { server.lock.withLock { server.stored } }

    /// The live samples by id (what `GET /steps` answers).
    public var live: [String: StepSampleDTO] { server.lock.withLock { server.latest.mapValues { Self.dto($0.sample) } } }

    /// The live samples by id with who wrote them.
    public var held: [String: Held] { server.lock.withLock { server.latest } }

    /// Every deletion applied (an id that was live), in order.
    public var deletions: [String] { server.lock.withLock { server.deletedIDs } }

    /// The server's id (`digest`'s `serverId`).
    public var serverId: String {
        get { server.lock.withLock { server.serverId } }
        set { server.lock.withLock { server.serverId = newValue } }
    }

    /// What the server holds now, to put back with `restore` (a backup).
    public func backup() -> (latest: [String: Held], deletedBy: [String: String]) {
        server.lock.withLock { (server.latest, server.deletedBy) }
    }

    /// Puts back what `backup` returned, as a restored database would be.
    public func restore(_ backup: (latest: [String: Held], deletedBy: [String: String])) {
        server.lock.withLock {
            server.latest = backup.latest
            server.deletedBy = backup.deletedBy
        }
    }

    /// Changes what the server holds behind the API's back (an operator's `DELETE`, an `UPDATE`).
    public func tamper(_ change: (inout [String: Held]) -> Void) {
        server.lock.withLock { change(&server.latest) }
    }

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
        server.lock.withLock {
            var deleted = 0
            for id in ids.map(\.uuidString) where server.latest.removeValue(forKey: id) != nil {
                server.deletedIDs.append(id)
                server.deletedBy[id] = uploader ?? ""
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

    /// As the real server: identical content keeps its uploader unless it had none.
    private func save(_ samples: [StepSample]) -> Int {
        let writer = uploader ?? ""
        return server.lock.withLock {
            var saved = 0
            for s in samples {
                var sample = s
                sample.origin = .unspecified // not content: the server never sees it
                let id = s.id.uuidString
                if let before = server.latest[id], before.sample == sample {
                    if before.uploader.isEmpty { server.latest[id]?.uploader = writer }
                    continue
                }
                server.latest[id] = Held(sample: sample, uploader: writer)
                server.deletedBy[id] = nil
                server.stored.append(Self.dto(sample))
                saved += 1
            }
            return saved
        }
    }

    static func dto(_ s: StepSample) -> StepSampleDTO {
        StepSampleDTO(id: s.id.uuidString, startDate: ISO8601.format(milliseconds: s.startMilliseconds),
                      endDate: ISO8601.format(milliseconds: s.endMilliseconds), countThousandths: s.countThousandths,
                      sourceBundleId: s.sourceBundleId, sourceDeviceName: s.sourceDeviceName)
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        server.lock.withLock {
            let page = server.stored.dropFirst(offset).prefix(limit)
            return StepSampleListResponse(samples: Array(page), total: server.stored.count)
        }
    }

    public func healthCheck() async throws -> Bool { true }

    // MARK: Digests

    /// The digest of each UTC day of what `uploader` last wrote.
    private func days(of uploader: String) -> [Int64: SamplesDigest] {
        server.lock.withLock {
            var days: [Int64: SamplesDigest] = [:]
            for held in server.latest.values where held.uploader == uploader {
                days[SampleDigest.day(held.sample), default: SamplesDigest()].add(SampleDigest.hash(held.sample))
            }
            return days
        }
    }

    public func digest(uploader: String) async throws -> UploaderDigestResponse {
        lock.withLock { digestRequests += 1 }
        guard offersDigests else { throw APIError.serverError(statusCode: 404, message: "Not Found: GET /steps/digest") }
        let days = days(of: uploader)
        var total = SamplesDigest()
        for day in days.values { total.add(day) }
        return UploaderDigestResponse(serverId: serverId, user: user, uploader: uploader, count: total.count,
                                      digest: SamplesDigest.hex(total.sum), days: days.count)
    }

    public func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage {
        lock.withLock { digestRequests += 1 }
        let first = after.flatMap(LocalDayCalendar.parse(date:)).map { $0 + 1 } ?? .min
        let rows = days(of: uploader).filter { $0.key >= first }.sorted { $0.key < $1.key }
        return DayDigestsPage(days: rows.map { DayDigestDTO(day: LocalDayCalendar.format(day: $0.key), count: $0.value.count,
                                                             digest: SamplesDigest.hex($0.value.sum)) }, next: nil)
    }

    public func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage {
        lock.withLock { digestRequests += 1 }
        guard let number = LocalDayCalendar.parse(date: day) else { throw APIError.serverError(statusCode: 400, message: "day") }
        let rows: [SampleHashDTO] = server.lock.withLock {
            return server.latest.filter { $0.value.uploader == uploader && SampleDigest.day($0.value.sample) == number }
                .map { SampleHashDTO(id: $0.key, hash: SamplesDigest.hex(SampleDigest.hash($0.value.sample))) }
        }
        let page = rows.filter { $0.id > (after ?? "") }.sorted { $0.id < $1.id }.prefix(pageSize)
        return DaySamplesPage(samples: Array(page), next: page.count == pageSize ? page.last?.id : nil)
    }

    public func lookup(_ ids: [UUID]) async throws -> LookupResponse {
        lock.withLock { digestRequests += 1 }
        return server.lock.withLock {
            var found: [LookupEntryDTO] = []
            for id in Set(ids.map(\.uuidString)).sorted() {
                if let held = server.latest[id] {
                    found.append(LookupEntryDTO(id: id, state: "live", uploader: held.uploader,
                                                day: LocalDayCalendar.format(day: SampleDigest.day(held.sample)),
                                                hash: SamplesDigest.hex(SampleDigest.hash(held.sample))))
                } else if let by = server.deletedBy[id] {
                    found.append(LookupEntryDTO(id: id, state: "deleted", uploader: by))
                }
            }
            return LookupResponse(samples: found)
        }
    }
}
