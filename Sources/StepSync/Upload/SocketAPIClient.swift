import Foundation
import StepLog

/// The API client over a plain socket (HTTP/1.1, one keep-alive connection,
/// blocking I/O on its own thread), for `http://` URLs.
///
/// Why it exists beside `LiveAPIClient`: on Linux, FoundationNetworking's
/// URLSession keeps a core busy while a request is out (measured here: 3.3 s
/// of CPU for two requests that each waited 2 s). On a two-core machine that
/// core is the server's, and uploads reached only ~78% of what the server can
/// take. This client waits in poll(2) and spends microseconds per request.
/// `https://` still goes through URLSession (TLS).
public final class SocketAPIClient: APIClient, @unchecked Sendable {
    public let baseURL: String
    private let connection: HTTPConnection
    private let timeout: TimeInterval
    private let queue = DispatchQueue(label: "steplog.http")
    private let pathPrefix: String
    /// `Authorization: Bearer …\r\n`, or empty without a token.
    private let authorization: String

    /// `token`: sent as `Authorization: Bearer <token>` on every request but
    /// `GET /health`; nil for a `--single-user` server.
    public init(baseURL: String, timeout: TimeInterval = 30, token: String? = nil) throws {
        guard let url = URL(string: baseURL), url.scheme == "http", let host = url.host, !host.isEmpty else {
            throw APIError.invalidURL(baseURL)
        }
        self.baseURL = baseURL
        self.timeout = timeout
        connection = HTTPConnection(host: host, port: url.port ?? 80)
        var path = url.path
        while path.hasSuffix("/") { path.removeLast() }
        pathPrefix = path
        authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
    }

    /// Runs one request on the connection's thread.
    private func request(_ method: String, _ path: String, body: Data? = nil, timeout: TimeInterval? = nil) async throws -> Data {
        let deadline = Date().addingTimeInterval(timeout ?? self.timeout)
        let connection = connection, authorization = path == "/health" ? "" : authorization
        let fullPath = pathPrefix + path
        let response: HTTPConnection.Response = try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    continuation.resume(returning: try connection.send(method: method, path: fullPath, body: body,
                                                                        contentType: body == nil ? nil : "application/json",
                                                                        extraHeaders: authorization, deadline: deadline))
                } catch {
                    continuation.resume(throwing: APIError.networkError(underlying: error))
                }
            }
        }
        guard (200...299).contains(response.status) else {
            throw APIError.status(response.status, body: response.body, tokenSent: !authorization.isEmpty)
        }
        return response.body
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do { return try JSONDecoder().decode(type, from: data) } catch { throw APIError.decodingError(underlying: error) }
    }

    public func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        try await postSteps(samples, encodedBody: StepsRequestBody.encode(samples))
    }

    public func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse {
        try decode(StepSampleResponse.self, try await request("POST", "/steps", body: encodedBody))
    }

    public func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse {
        try decode(DeletionResponse.self, try await request("POST", "/steps/deletions", body: DeletionsRequestBody.encode(ids)))
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        try decode(StepSampleListResponse.self, try await request("GET", "/steps?limit=\(limit)&offset=\(offset)"))
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
