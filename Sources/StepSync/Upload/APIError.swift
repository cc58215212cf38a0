import Foundation

/// Seed 002's `APIError`, with retry classification: connection problems,
/// timeouts and 5xx are worth retrying; 4xx means the request itself is wrong.
public enum APIError: Error, CustomStringConvertible {
    case invalidURL(String)
    case networkError(underlying: Error)
    /// `retryAfter`: the seconds of the answer's Retry-After header (a 503 while the server's
    /// database fails over, a 429), the least a retry should wait.
    case serverError(statusCode: Int, message: String?, retryAfter: Double? = nil)
    case decodingError(underlying: Error)
    case serverUnreachable(url: String, reason: String)
    /// 401: the server wants a token and got none, or refused the one sent.
    /// Never retried (the same token would be refused again).
    case unauthorized(tokenSent: Bool, message: String?)

    public var isRetryable: Bool {
        switch self {
        case .networkError, .serverUnreachable: return true
        case .serverError(let code, _, _): return code >= 500 || code == 408 || code == 429
        case .invalidURL, .decodingError, .unauthorized: return false
        }
    }

    public var description: String {
        switch self {
        case .invalidURL(let text): return "invalid API URL '\(text)'"
        case .networkError(let error): return "network error: \(Self.describe(error))"
        case .serverError(let code, let message, _):
            return "server error \(code): \(message.map(Self.oneLine) ?? "no message")"
        case .decodingError(let error): return "cannot decode the server's response: \(error)"
        case .serverUnreachable(let url, let reason): return "cannot reach the API at \(url) (\(reason))"
        case .unauthorized(let sent, let message):
            let server = message.map { " (server: \(Self.oneLine($0)))" } ?? ""
            return sent ? "the server refused the token\(server); check --token-file or STEPSYNC_TOKEN, or ask for a new token"
                        : "the server requires a token\(server); give it with --token-file PATH or STEPSYNC_TOKEN"
        }
    }

    /// The least wait before a retry the server asked for (Retry-After), if any.
    public var retryAfter: Double? {
        if case .serverError(_, _, let seconds) = self { return seconds }
        return nil
    }

    /// The error for a non-2xx answer: 401 is `unauthorized`, the rest `serverError`.
    /// `retryAfter`: the answer's Retry-After header, if it had one.
    static func status(_ code: Int, body: Data, tokenSent: Bool, retryAfter: String? = nil) -> APIError {
        let text = String(decoding: body, as: UTF8.self)
        if code == 401 { return .unauthorized(tokenSent: tokenSent, message: text.isEmpty ? nil : text) }
        return .serverError(statusCode: code, message: text, retryAfter: retryAfter.flatMap(seconds(retryAfter:)))
    }

    /// A Retry-After header's delay in seconds (RFC 9110: digits); nil for the date form or
    /// anything else (the retry then waits its own back-off).
    static func seconds(retryAfter header: String) -> Double? {
        let digits = header.trimmingCharacters(in: .whitespaces)
        guard !digits.isEmpty, digits.count <= 9, digits.utf8.allSatisfy({ (48...57).contains($0) }) else { return nil }
        return Double(digits)
    }

    /// The server's `{"error": "…"}` message when it sent one, else the body.
    static func oneLine(_ body: String) -> String {
        if let data = body.data(using: .utf8),
           let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
           let error = object["error"] as? String {
            return error
        }
        return body.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(300).description
    }

    static func describe(_ error: Error) -> String {
        if let failure = error as? HTTPConnection.Failure { return failure.description }
        if let urlError = error as? URLError {
            switch urlError.code {
            case .timedOut: return "timed out"
            case .cannotConnectToHost: return "connection refused"
            case .networkConnectionLost: return "connection lost"
            case .cannotFindHost: return "unknown host"
            default: return urlError.localizedDescription
            }
        }
        return String(describing: error)
    }
}
