import Foundation
import Testing
@testable import StepSync

/// The upload client's HTTP response parser fed bytes directly, as the
/// socket would deliver them (`HTTPConnection` reads through it).
@Suite struct HTTPResponseReaderTests {
    /// Reads one response from `text`, delivered `piece` bytes at a time, then the end of the connection.
    static func read(_ text: String, piece: Int = 1 << 20) throws -> HTTPConnection.Response {
        let bytes = Array(text.utf8)
        var delivered = 0
        var reader = HTTPResponseReader()
        return try reader.read { buffer in
            guard delivered < bytes.count else { throw HTTPConnection.Failure.connectionLost("closed by the server") }
            let end = min(bytes.count, delivered + piece)
            buffer += bytes[delivered..<end]
            delivered = end
        }
    }

    @Test func chunkedBodiesAreJoinedWhateverThePieces() throws {
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"ok\":1\r\n1; ext=1\r\n}\r\n0\r\n\r\n"
        for piece in [1, 3, 1 << 20] {
            let response = try Self.read(text, piece: piece)
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == "{\"ok\":1}")
            #expect(response.keepAlive)
        }
    }

    /// Headers and chunk-size lines arriving a byte or a few at a time are
    /// found wherever the pieces cut their CRLFs (each search resumes where
    /// the last stopped, so a slow sender costs linear time).
    @Test func headersSplitAnywhereAreFound() throws {
        let padding = (0..<200).map { "X-Padding-\($0): \(String(repeating: "v", count: $0 % 37))\r\n" }.joined()
        let text = "HTTP/1.1 201 Created\r\n\(padding)Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"
        for piece in [1, 2, 3, 4, 5, 4096] {
            let response = try Self.read(text, piece: piece)
            #expect(response.status == 201, "pieces of \(piece)")
            #expect(String(decoding: response.body, as: UTF8.self) == "abc0123456789abcdef", "pieces of \(piece)")
        }
    }

    /// A chunk size with a sign, or too large to add to, is a protocol error,
    /// never a trap (found by the http fuzz target: "-1" crashed the client;
    /// the reproducer is in its corpus).
    @Test func impossibleChunkSizesAreProtocolErrors() {
        for size in ["-1", "+5", "-0", "7fffffffffffffff", "ffffffffffffffffff", "", "zz"] {
            let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nabc\r\n0\r\n\r\n"
            let error = #expect(throws: HTTPConnection.Failure.self, "chunk size '\(size)'") { _ = try Self.read(text) }
            guard case .protocolError(let why)? = error else {
                Issue.record("chunk size '\(size)': expected a protocol error, got \(String(describing: error))")
                continue
            }
            #expect(why == "chunk size '\(size)'")
        }
    }
}
