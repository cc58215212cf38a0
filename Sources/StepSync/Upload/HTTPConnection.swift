import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One keep-alive HTTP/1.1 connection over a POSIX socket: requests with a
/// Content-Length body, responses with Content-Length or chunked bodies.
/// Blocking calls bounded by a deadline (poll). Used from one serial queue
/// only (`SocketAPIClient`), hence the unchecked Sendable. Plain HTTP only.
final class HTTPConnection: @unchecked Sendable {
    struct Response {
        var status: Int
        var body: Data
        var keepAlive: Bool
        /// The Retry-After header, as sent.
        var retryAfter: String? = nil
    }

    /// Transport failures, worded for people.
    enum Failure: Error, CustomStringConvertible {
        case timedOut
        case connectionRefused
        case connectionLost(String)
        case resolve(String)
        case protocolError(String)

        var description: String {
            switch self {
            case .timedOut: "timed out"
            case .connectionRefused: "connection refused"
            case .connectionLost(let why): "connection lost (\(why))"
            case .resolve(let host): "cannot resolve \(host)"
            case .protocolError(let why): "bad HTTP response (\(why))"
            }
        }
    }

    let host: String
    let port: Int
    private var fd: Int32 = -1
    /// Bytes received and not yet consumed, and the response parser over them.
    private var reader = HTTPResponseReader()

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    deinit { disconnect() }

    func disconnect() {
        if fd >= 0 { close(fd) }
        fd = -1
        reader.buffer.removeAll()
    }

    /// Sends a request and reads its response. A connection the server closed
    /// while idle (keep-alive) is reopened once, transparently.
    /// `extraHeaders` are complete header lines, each ending in CRLF (the
    /// credentials: they go on the wire only, never into an error).
    func send(method: String, path: String, body: Data?, contentType: String?, extraHeaders: String = "",
              deadline: Date) throws -> Response {
        let reused = fd >= 0
        do {
            return try attempt(method: method, path: path, body: body, contentType: contentType, extraHeaders: extraHeaders,
                               deadline: deadline)
        } catch Failure.connectionLost(let why) where reused {
            _ = why
            disconnect()
            return try attempt(method: method, path: path, body: body, contentType: contentType, extraHeaders: extraHeaders,
                               deadline: deadline)
        }
    }

    private func attempt(method: String, path: String, body: Data?, contentType: String?, extraHeaders: String,
                         deadline: Date) throws -> Response {
        if fd < 0 { try connect(deadline: deadline) }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: keep-alive\r\nAccept: application/json\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        head += extraHeaders
        head += "Content-Length: \(body?.count ?? 0)\r\n\r\n"
        do {
            try writeAll(Array(head.utf8), deadline: deadline)
            if let body, !body.isEmpty { try body.withUnsafeBytes { try writeAll($0, deadline: deadline) } }
            let response = try readResponse(deadline: deadline)
            if !response.keepAlive { disconnect() }
            return response
        } catch {
            disconnect()
            throw error
        }
    }

    // MARK: Socket

    private func connect(deadline: Date) throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let first = result else { throw Failure.resolve(host) }
        defer { freeaddrinfo(result) }
        var lastError = Failure.connectionRefused
        var info: UnsafeMutablePointer<addrinfo>? = first
        while let ai = info {
            info = ai.pointee.ai_next
            let s = socket(ai.pointee.ai_family, ai.pointee.ai_socktype, ai.pointee.ai_protocol)
            guard s >= 0 else { continue }
            _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK)
            _ = fcntl(s, F_SETFD, FD_CLOEXEC) // an embedding app's child processes must not inherit it
            var one: Int32 = 1
            _ = setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            #if canImport(Darwin)
            _ = setsockopt(s, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
            #endif
            if Glibc_or_Darwin_connect(s, ai.pointee.ai_addr, ai.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                do {
                    try wait(s, for: Int16(POLLOUT), deadline: deadline)
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    _ = getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &length)
                    if error == 0 {
                        fd = s
                        return
                    }
                    lastError = error == ECONNREFUSED ? .connectionRefused : .connectionLost(String(cString: strerror(error)))
                } catch let failure as Failure {
                    lastError = failure
                }
            }
            close(s)
        }
        throw lastError
    }

    private func wait(_ s: Int32, for events: Int16, deadline: Date) throws {
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { throw Failure.timedOut }
            var p = pollfd(fd: s, events: events, revents: 0)
            let n = poll(&p, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
            if n > 0 { return }
            if n == 0 { throw Failure.timedOut }
            if errno != EINTR { throw Failure.connectionLost(String(cString: strerror(errno))) }
        }
    }

    private func writeAll(_ bytes: UnsafeRawBufferPointer, deadline: Date) throws {
        var done = 0
        while done < bytes.count {
            #if canImport(Glibc)
            let n = Glibc.send(fd, bytes.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
            #else
            let n = Darwin.send(fd, bytes.baseAddress! + done, bytes.count - done, 0)
            #endif
            if n > 0 { done += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { try wait(fd, for: Int16(POLLOUT), deadline: deadline); continue }
            if n < 0 && errno == EINTR { continue }
            throw Failure.connectionLost(n == 0 ? "closed" : String(cString: strerror(errno)))
        }
    }

    private func writeAll(_ bytes: [UInt8], deadline: Date) throws {
        try bytes.withUnsafeBytes { try writeAll($0, deadline: deadline) }
    }

    /// Reads more bytes into `buffer`; EOF is a lost connection.
    private func fill(_ buffer: inout [UInt8], deadline: Date) throws {
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 { buffer += chunk[0..<n]; return }
            if n == 0 { throw Failure.connectionLost("closed by the server") }
            if errno == EAGAIN || errno == EWOULDBLOCK { try wait(fd, for: Int16(POLLIN), deadline: deadline); continue }
            if errno == EINTR { continue }
            throw Failure.connectionLost(String(cString: strerror(errno)))
        }
    }

    // MARK: Response

    private func readResponse(deadline: Date) throws -> Response {
        try reader.read { buffer in try fill(&buffer, deadline: deadline) }
    }
}

#if canImport(Glibc)
private func Glibc_or_Darwin_connect(_ s: Int32, _ a: UnsafePointer<sockaddr>!, _ l: socklen_t) -> Int32 { Glibc.connect(s, a, l) }
#else
private func Glibc_or_Darwin_connect(_ s: Int32, _ a: UnsafePointer<sockaddr>!, _ l: socklen_t) -> Int32 { Darwin.connect(s, a, l) }
#endif
