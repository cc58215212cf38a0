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
    public let uploader: String?

    /// `timeout` bounds each request (connect, send, wait for the answer).
    /// `token`: sent as `Authorization: Bearer <token>` (not on `GET /health`).
    /// `connections`: at most this many to the server at once (requests in flight beyond them wait).
    /// `uploader`: the store's uploader id, sent with every write.
    public init(baseURL: String, timeout: TimeInterval = 30, token: String? = nil, connections: Int = 2, uploader: String? = nil) throws {
        guard let url = URL(string: baseURL), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil else {
            throw APIError.invalidURL(baseURL)
        }
        self.baseURL = url
        self.timeout = timeout
        self.token = token
        self.uploader = uploader
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
        try await postSteps(samples, encodedBody: StepsRequestBody.encode(samples, uploader: uploader))
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
        request.httpBody = DeletionsRequestBody.encode(ids, uploader: uploader)
        return try decode(DeletionResponse.self, try await perform(request))
    }

    public func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse {
        try await get(StepSampleListResponse.self, "/steps", query: "?limit=\(limit)&offset=\(offset)")
    }

    private func get<T: Decodable>(_ type: T.Type, _ path: String, query: String) async throws -> T {
        var request = URLRequest(url: url(path, query: query))
        request.httpMethod = "GET"
        return try decode(type, try await perform(request))
    }

    public func digest(uploader: String) async throws -> UploaderDigestResponse {
        try await get(UploaderDigestResponse.self, "/steps/digest", query: "?uploader=\(uploader)")
    }

    public func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage {
        try await get(DayDigestsPage.self, "/steps/digest/days", query: "?uploader=\(uploader)" + (after.map { "&after=\($0)" } ?? ""))
    }

    public func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage {
        try await get(DaySamplesPage.self, "/steps/digest/samples",
                      query: "?uploader=\(uploader)&day=\(day)" + (after.map { "&after=\($0)" } ?? ""))
    }

    public func lookup(_ ids: [UUID]) async throws -> LookupResponse {
        var request = URLRequest(url: url("/steps/digest/lookup"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = DeletionsRequestBody.encode(ids)
        return try decode(LookupResponse.self, try await perform(request))
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
