import Foundation
import StepLog

/// The API client over a plain socket (HTTP/1.1 keep-alive connections,
/// blocking I/O, each connection on its own serial queue), for `http://` URLs.
/// A request takes the first idle connection (one after another, every
/// request goes over the first), so requests in flight together (an upload
/// keeping several out) each have their own, up to `connections`; beyond that
/// they wait for the least busy one.
///
/// Why it exists beside `LiveAPIClient`: on Linux, FoundationNetworking's
/// URLSession keeps a core busy while a request is out, waiting. On a
/// two-core machine that core is the server's, and uploads fell well short
/// of what the server can take. This client waits in poll(2) and spends
/// microseconds per request.
/// `https://` still goes through URLSession (TLS).
public final class SocketAPIClient: APIClient, @unchecked Sendable {
    public let baseURL: String
    private let connections: [(connection: HTTPConnection, queue: DispatchQueue)]
    private let lock = NSLock()
    /// Requests queued or running on each connection.
    private var busy: [Int]
    private let timeout: TimeInterval
    private let pathPrefix: String
    /// `Authorization: Bearer …\r\n`, or empty without a token.
    private let authorization: String
    public let uploader: String?

    /// `token`: sent as `Authorization: Bearer <token>` on every request but
    /// `GET /health`; nil for a `--single-user` server.
    /// `connections`: at most this many open at once (at least 1).
    /// `uploader`: the store's uploader id, sent with every write.
    public init(baseURL: String, timeout: TimeInterval = 30, token: String? = nil, connections: Int = 2, uploader: String? = nil) throws {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host, !host.isEmpty else {
            throw APIError.invalidURL(baseURL)
        }
        self.baseURL = baseURL
        self.timeout = timeout
        self.connections = (0..<max(1, connections)).map {
            (HTTPConnection(host: host, port: url.port ?? 80), DispatchQueue(label: "steplog.http.\($0)"))
        }
        busy = [Int](repeating: 0, count: max(1, connections))
        var path = url.path
        while path.hasSuffix("/") { path.removeLast() }
        pathPrefix = path
        authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        self.uploader = uploader
    }

    /// The first idle connection, else the least busy; counted busy until `release`.
    private func take() -> Int {
        lock.withLock {
            let index = busy.firstIndex(of: 0) ?? busy.indices.min { busy[$0] < busy[$1] }!
            busy[index] += 1
            return index
        }
    }

    private func release(_ index: Int) { lock.withLock { busy[index] -= 1 } }

    /// Runs one request on a connection's queue.
    private func request(_ method: String, _ path: String, body: Data? = nil, timeout: TimeInterval? = nil) async throws -> Data {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        let authorization = path == "/health" ? "" : authorization
        let fullPath = pathPrefix + path
        let index = take()
        let (connection, queue) = connections[index]
        let response: HTTPConnection.Response = try await withCheckedThrowingContinuation { continuation in
            queue.async { [self] in
                let result = Result {
                    try connection.send(method: method, path: fullPath, body: body, contentType: body == nil ? nil : "application/json",
                                        extraHeaders: authorization, deadline: deadline)
                }
                release(index) // before the caller resumes: its next request finds this connection idle
                continuation.resume(with: result.mapError { APIError.networkError(underlying: $0) })
            }
        }
        guard (200...299).contains(response.status) else {
            throw APIError.status(response.status, body: response.body, tokenSent: !authorization.isEmpty, retryAfter: response.retryAfter)
        }
        return response.body
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do { return try JSONDecoder().decode(type, from: data) } catch { throw APIError.decodingError(underlying: error) }
    }

    public func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        try await postSteps(samples, encodedBody: StepsRequestBody.encode(samples, uploader: uploader))
    }

    public func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse {
        try decode(StepSampleResponse.self, try await request("POST", "/steps", body: encodedBody))
    }

    public func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse {
        try decode(DeletionResponse.self, try await request("POST", "/steps/deletions", body: DeletionsRequestBody.encode(ids, uploader: uploader)))
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        try decode(StepSampleListResponse.self, try await request("GET", "/steps?limit=\(limit)&offset=\(offset)"))
    }

    public func digest(uploader: String) async throws -> UploaderDigestResponse {
        try decode(UploaderDigestResponse.self, try await request("GET", "/steps/digest?uploader=\(uploader)"))
    }

    public func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage {
        try decode(DayDigestsPage.self, try await request("GET", "/steps/digest/days?uploader=\(uploader)" + (after.map { "&after=\($0)" } ?? "")))
    }

    public func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage {
        try decode(DaySamplesPage.self, try await request(
            "GET", "/steps/digest/samples?uploader=\(uploader)&day=\(day)" + (after.map { "&after=\($0)" } ?? "")))
    }

    public func lookup(_ ids: [UUID]) async throws -> LookupResponse {
        try decode(LookupResponse.self, try await request("POST", "/steps/digest/lookup", body: DeletionsRequestBody.encode(ids)))
    }

    public func healthCheck() async throws -> Bool {
        let data: Data
        do {
            data = try await request("GET", "/health", timeout: min(timeout, 5))
        } catch APIError.networkError(let underlying) {
            throw APIError.serverUnreachable(url: baseURL, reason: APIError.describe(underlying))
        }
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        return object?["status"] as? String == "ok"
    }
}
