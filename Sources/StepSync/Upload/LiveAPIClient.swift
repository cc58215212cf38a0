import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import StepLog

/// The HTTP client (URLSession; FoundationNetworking on Linux).
public final class LiveAPIClient: APIClient, @unchecked Sendable {
    public let baseURL: URL
    private let session: URLSession
    private let timeout: TimeInterval
    private let token: String?

    /// `timeout` bounds each request (connect, send, wait for the answer).
    /// `token`: sent as `Authorization: Bearer <token>` (not on `GET /health`).
    /// `connections`: at most this many to the server at once (requests in flight beyond them wait).
    public init(baseURL: String, timeout: TimeInterval = 30, token: String? = nil, connections: Int = 2) throws {
        guard let url = URL(string: baseURL), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw APIError.invalidURL(baseURL)
        }
        self.baseURL = url
        self.timeout = timeout
        self.token = token
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout
        configuration.timeoutIntervalForResource = timeout * 2
        configuration.httpMaximumConnectionsPerHost = max(1, connections)
        session = URLSession(configuration: configuration)
    }

    deinit { session.invalidateAndCancel() }

    private func url(_ path: String, query: String = "") -> URL {
        var text = baseURL.absoluteString
        if text.hasSuffix("/") { text.removeLast() }
        return URL(string: text + path + query)!
    }

    private func perform(_ request: URLRequest, authorized: Bool = true) async throws -> Data {
        var request = request
        if authorized, let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        let data: Data, response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch {
            throw APIError.networkError(underlying: error)
        }
        guard let http = response as? HTTPURLResponse else {
            throw APIError.networkError(underlying: URLError(.badServerResponse))
        }
        guard (200...299).contains(http.statusCode) else {
            throw APIError.status(http.statusCode, body: data, tokenSent: authorized && token != nil,
                                  retryAfter: http.value(forHTTPHeaderField: "Retry-After"))
        }
        return data
    }

    private func decode<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        do { return try JSONDecoder().decode(type, from: data) } catch { throw APIError.decodingError(underlying: error) }
    }

    public func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse {
        try await postSteps(samples, encodedBody: StepsRequestBody.encode(samples))
    }

    public func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse {
        var request = URLRequest(url: url("/steps"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = encodedBody
        return try decode(StepSampleResponse.self, try await perform(request))
    }

    public func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse {
        var request = URLRequest(url: url("/steps/deletions"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = DeletionsRequestBody.encode(ids)
        return try decode(DeletionResponse.self, try await perform(request))
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        var request = URLRequest(url: url("/steps", query: "?limit=\(limit)&offset=\(offset)"))
        request.httpMethod = "GET"
        return try decode(StepSampleListResponse.self, try await perform(request))
    }

    public func healthCheck() async throws -> Bool {
        var request = URLRequest(url: url("/health"))
        request.httpMethod = "GET"
        request.timeoutInterval = min(timeout, 5)
        let data: Data
        do {
            data = try await perform(request, authorized: false)
        } catch APIError.networkError(let underlying) {
            throw APIError.serverUnreachable(url: baseURL.absoluteString, reason: APIError.describe(underlying))
        }
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        return object?["status"] as? String == "ok"
    }
}
