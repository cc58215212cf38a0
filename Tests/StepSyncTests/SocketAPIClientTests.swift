import Foundation
import Testing
@testable import StepLog
@testable import StepSync
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loopback server that answers each request with scripted raw bytes
/// (chunked bodies, `Connection: close`, silence), one connection at a time.
final class ScriptedHTTPServer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var script: [(String) -> (bytes: [UInt8], close: Bool)?]
    private(set) var connections = 0
    private var thread: Thread?

    init(_ script: [(String) -> (bytes: [UInt8], close: Bool)?]) throws {
        self.script = script
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(s, 4)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) } }
        listener = s
        port = Int(UInt16(bigEndian: address.sin_port))
        let t = Thread { [self] in serve() }
        thread = t
        t.start()
    }

    deinit { close(listener) }

    private func serve() {
        while true {
            let c = accept(listener, nil, nil)
            if c < 0 { return }
            lock.withLock { connections += 1 }
            var pending = ""
            connection: while true {
                var chunk = [UInt8](repeating: 0, count: 65536)
                let n = recv(c, &chunk, chunk.count, 0)
                if n <= 0 { break }
                pending += String(decoding: chunk[0..<n], as: UTF8.self)
                // One request per step (bodies here are small and end with the headers' length).
                while let end = pending.range(of: "\r\n\r\n") {
                    let head = String(pending[..<end.lowerBound])
                    let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                        .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                    guard pending.utf8.count >= head.utf8.count + 4 + length else { break }
                    pending = String(pending.dropFirst(head.count + 4 + length))
                    let step = lock.withLock { script.isEmpty ? nil : script.removeFirst() }
                    guard let answer = step?(head) else { break connection } // silence: hang up
                    _ = answer.bytes.withUnsafeBytes { send(c, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                    if answer.close { break connection }
                }
            }
            close(c)
        }
    }

    static func reply(_ body: String, status: Int = 200, extra: String = "", close: Bool = false) -> (bytes: [UInt8], close: Bool) {
        (Array("HTTP/1.1 \(status) OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n\(body)".utf8), close)
    }
}

@Suite(.serialized) struct SocketAPIClientTests {
    let ok = "{\"saved\":1,\"message\":\"Success\"}"

    @Test func keepAliveChunkedAndConnectionClose() async throws {
        let server = try ScriptedHTTPServer([
            { _ in ScriptedHTTPServer.reply("{\"status\":\"ok\"}") },
            { head in
                #expect(head.hasPrefix("POST /steps HTTP/1.1") && head.contains("Content-Type: application/json"))
                // A chunked body in three pieces.
                let pieces = ["{\"sav", "ed\":1,\"message\":\"", "Success\"}"]
                let chunks = pieces.map { String($0.utf8.count, radix: 16) + "\r\n" + $0 + "\r\n" }.joined()
                return (Array(("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + "0\r\n\r\n").utf8), false)
            },
            { _ in ScriptedHTTPServer.reply(self.ok, extra: "Connection: close\r\n", close: true) },
            { _ in ScriptedHTTPServer.reply(self.ok) },
        ])
        let client = try SocketAPIClient(baseURL: "http://127.0.0.1:\(server.port)", timeout: 5)
        #expect(try await client.healthCheck())
        let sample = StepSample(id: .init(), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b", sourceDeviceName: nil)
        #expect(try await client.postSteps([sample]) == StepSampleResponse(saved: 1, message: "Success"))
        #expect(try await client.postSteps([sample]).saved == 1) // answered with Connection: close
        #expect(try await client.postSteps([sample]).saved == 1) // a new connection
        #expect(server.connections == 2)
    }

    @Test func anIdleConnectionTheServerClosedIsReopened() async throws {
        let server = try ScriptedHTTPServer([
            { _ in ScriptedHTTPServer.reply("{\"status\":\"ok\"}") },
            { _ in nil }, // the server hangs up instead of answering (idle keep-alive timeout)
            { _ in ScriptedHTTPServer.reply(self.ok) },
        ])
        let client = try SocketAPIClient(baseURL: "http://127.0.0.1:\(server.port)", timeout: 5)
        #expect(try await client.healthCheck())
        let sample = StepSample(id: .init(), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b", sourceDeviceName: nil)
        #expect(try await client.postSteps([sample]).saved == 1)
        #expect(server.connections == 2)
    }

    @Test func theTokenGoesInTheAuthorizationHeaderAndA401IsOneLineNeverRetried() async throws {
        let token = "sst_" + String(repeating: "k", count: 43)
        let heads = HeadLog()
        let server = try ScriptedHTTPServer([
            { heads.add($0); return ScriptedHTTPServer.reply("{\"status\":\"ok\"}") },
            { heads.add($0); return ScriptedHTTPServer.reply("{\"deleted\":2,\"message\":\"Success\"}") },
            { heads.add($0); return ScriptedHTTPServer.reply("{\"error\":\"unknown or revoked token\"}", status: 401,
                                                           extra: "WWW-Authenticate: Bearer\r\n") },
        ])
        let client = try SocketAPIClient(baseURL: "http://127.0.0.1:\(server.port)", timeout: 5, token: token)
        #expect(try await client.healthCheck())
        #expect(try await client.postDeletions([UUID(), UUID()]) == DeletionResponse(deleted: 2, message: "Success"))
        let sample = StepSample(id: .init(), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b", sourceDeviceName: nil)
        do { _ = try await client.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(!error.isRetryable)
            #expect(error.description == "the server refused the token (server: unknown or revoked token); check --token-file or STEPSYNC_TOKEN, or ask for a new token")
            #expect(!error.description.contains(token))
        }
        let seen = heads.all
        #expect(seen.count == 3)
        #expect(seen[0].hasPrefix("GET /health ") && !seen[0].contains("Authorization"))
        #expect(seen[1].hasPrefix("POST /steps/deletions ") && seen[1].contains("\r\nAuthorization: Bearer \(token)"))
        #expect(seen[2].hasPrefix("POST /steps ") && seen[2].contains("\r\nAuthorization: Bearer \(token)"))
        #expect(APIError.unauthorized(tokenSent: false, message: "{\"error\":\"missing token: send Authorization: Bearer <token>\"}").description
            == "the server requires a token (server: missing token: send Authorization: Bearer <token>); give it with --token-file PATH or STEPSYNC_TOKEN")
    }

    @Test func errorsAreClassified() async throws {
        let sample = StepSample(id: .init(), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b", sourceDeviceName: nil)
        // Nobody listening.
        let closed = ScriptedPort.unused()
        let refused = try SocketAPIClient(baseURL: "http://127.0.0.1:\(closed)", timeout: 2)
        do { _ = try await refused.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(error.isRetryable && error.description == "network error: connection refused")
        }
        await #expect(throws: APIError.self) { _ = try await refused.healthCheck() }
        // A server that answers 400 and one that never answers.
        let server = try ScriptedHTTPServer([
            { _ in ScriptedHTTPServer.reply("{\"error\":\"samples[0].count: must be an integer\"}", status: 400) },
            { _ in ([], false) }, // accepts the request and says nothing
        ])
        let client = try SocketAPIClient(baseURL: "http://127.0.0.1:\(server.port)", timeout: 0.5)
        do { _ = try await client.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(!error.isRetryable && error.description == "server error 400: samples[0].count: must be an integer")
        }
        do { _ = try await client.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(error.isRetryable && error.description == "network error: timed out")
        }
        #expect(throws: APIError.self) { _ = try SocketAPIClient(baseURL: "https://example.com") }
    }

    @Test func aRetryAfterHeaderIsKeptWithTheError() async throws {
        let sample = StepSample(id: .init(), startMilliseconds: 0, endMilliseconds: 1, count: 1, sourceBundleId: "b", sourceDeviceName: nil)
        let server = try ScriptedHTTPServer([
            { _ in ScriptedHTTPServer.reply("{\"error\":\"database unavailable; retry later\"}", status: 503, extra: "Retry-After: 10\r\n") },
            { _ in ScriptedHTTPServer.reply("{\"error\":\"busy\"}", status: 503) },
        ])
        let client = try SocketAPIClient(baseURL: "http://127.0.0.1:\(server.port)", timeout: 2)
        do { _ = try await client.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(error.isRetryable && error.retryAfter == 10)
            #expect(error.description == "server error 503: database unavailable; retry later")
        }
        do { _ = try await client.postSteps([sample]); Issue.record("no error") } catch let error as APIError {
            #expect(error.isRetryable && error.retryAfter == nil)
        }
        // Seconds only: the date form and anything else leave the client's own back-off.
        #expect(APIError.seconds(retryAfter: " 5 ") == 5 && APIError.seconds(retryAfter: "0") == 0)
        for text in ["", "-1", "1.5", "Wed, 21 Oct 2026 07:28:00 GMT", "1e3", "٣", "9999999999"] {
            #expect(APIError.seconds(retryAfter: text) == nil, "\(text)")
        }
    }
}

/// Request heads a scripted server saw, in order.
final class HeadLog: @unchecked Sendable {
    private let lock = NSLock()
    private var heads: [String] = []
    func add(_ head: String) { lock.withLock { heads.append(head) } }
    var all: [String] { lock.withLock { heads } }
}

enum ScriptedPort {
    /// A loopback port nobody listens on (bound, then closed).
    static func unused() -> Int {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(s) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
