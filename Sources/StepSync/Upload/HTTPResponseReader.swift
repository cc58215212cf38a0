import Foundation

/// Parses one HTTP/1.1 response out of the bytes a connection received:
/// status line, headers, then a body framed by Content-Length, by chunked
/// transfer encoding, or (neither) by the end of the connection. Holds the
/// bytes received and not yet consumed, so the next response on a keep-alive
/// connection starts where this one ended. Knows nothing of sockets: the
/// caller's `fill` appends more bytes (or throws, `connectionLost` at the
/// end of the stream), which lets tests and the fuzzer feed it bytes.
struct HTTPResponseReader {
    /// Received bytes not yet consumed by a response.
    var buffer: [UInt8] = []

    /// Reads one response, calling `fill` whenever it needs more bytes.
    mutating func read(fill: (inout [UInt8]) throws -> Void) throws -> HTTPConnection.Response {
        var headerEnd: Int?
        // Each search starts where the last one could not have matched, so a
        // server that sends a byte at a time costs linear time, not quadratic.
        var searched = 0
        while headerEnd == nil {
            headerEnd = Self.find([13, 10, 13, 10], in: buffer, from: searched)
            searched = max(0, buffer.count - 3)
            if headerEnd == nil {
                guard buffer.count < 64 << 10 else { throw HTTPConnection.Failure.protocolError("headers longer than 64 KiB") }
                try fill(&buffer)
            }
        }
        let head = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
        buffer.removeSubrange(0..<(headerEnd! + 4))
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw HTTPConnection.Failure.protocolError("status line '\(statusLine.joined(separator: " "))'")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var keepAlive = statusLine[0] == "HTTP/1.1"
        if let connection = headers["connection"]?.lowercased() { keepAlive = connection != "close" }
        var body: [UInt8] = []
        if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            while true {
                var lineEnd = Self.find([13, 10], in: buffer)
                while lineEnd == nil {
                    let searchedLine = max(0, buffer.count - 1)
                    try fill(&buffer)
                    lineEnd = Self.find([13, 10], in: buffer, from: searchedLine)
                }
                let sizeText = String(decoding: buffer[0..<lineEnd!], as: UTF8.self).split(separator: ";").first ?? ""
                // Hex digits only (Int(_:radix:) would also take a sign: a
                // negative size trapped), and few enough that size + 2 cannot overflow.
                let digits = sizeText.trimmingCharacters(in: .whitespaces)
                guard !digits.isEmpty, digits.count <= 15, digits.allSatisfy(\.isHexDigit), let size = Int(digits, radix: 16) else {
                    throw HTTPConnection.Failure.protocolError("chunk size '\(sizeText)'")
                }
                buffer.removeSubrange(0..<(lineEnd! + 2))
                while buffer.count < size + 2 { try fill(&buffer) }
                body += buffer[0..<size]
                buffer.removeSubrange(0..<(size + 2))
                if size == 0 { break }
            }
        } else if let lengthText = headers["content-length"] {
            guard let length = Int(lengthText), length >= 0 else { throw HTTPConnection.Failure.protocolError("content-length '\(lengthText)'") }
            while buffer.count < length { try fill(&buffer) }
            body = Array(buffer[0..<length])
            buffer.removeSubrange(0..<length)
        } else {
            // No length: the body runs to the end of the connection.
            keepAlive = false
            while true {
                do { try fill(&buffer) } catch HTTPConnection.Failure.connectionLost { break }
            }
            body = buffer
            buffer.removeAll()
        }
        return HTTPConnection.Response(status: status, body: Data(body), keepAlive: keepAlive, retryAfter: headers["retry-after"])
    }

    /// The first offset at or after `start` where `needle` occurs in `haystack`.
    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int = 0) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for i in start...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}
