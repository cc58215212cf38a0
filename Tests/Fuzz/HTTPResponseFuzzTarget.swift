// Fuzz target `http`: the HTTP/1.1 response parser of the upload client
// (Sources/StepSync/Upload/HTTPResponseReader.swift), fed bytes as a socket
// would deliver them, then the end of the connection.
//
// Input: a byte giving the delivery's piece size (1 + byte % 32), then the
// bytes the server sent. Up to four responses are read in turn from one
// connection, as keep-alive does.
//
// Invariants beyond "no crash":
// - the responses, their bodies and the error that ends the reading do not
//   depend on how the bytes were split into pieces (all at once vs. pieces);
// - a response never holds more body bytes than were received;
// - a response that says Content-Length has exactly that many body bytes.
import Foundation
@testable import StepSync

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHTTPResponse(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size >= 1 else { return 0 }
    let stream = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let whole = responses(stream, piece: max(stream.count, 1))
    let pieces = responses(stream, piece: 1 + Int(data[0]) % 32)
    fuzzCheck(whole == pieces, "the parse depends on how the bytes arrive: \(whole) vs \(pieces)")
    for response in whole.responses {
        fuzzCheck(response.body.count <= stream.count, "a body of \(response.body.count) bytes from \(stream.count) received")
    }
    return 0
}

private struct Outcome: Equatable, CustomStringConvertible {
    struct Response: Equatable { var status: Int; var body: Data; var keepAlive: Bool }
    var responses: [Response] = []
    var error: String?
    var description: String { "\(responses.map { "\($0.status) \($0.body.count) bytes keepAlive \($0.keepAlive)" }) then \(error ?? "-")" }
}

private func responses(_ stream: [UInt8], piece: Int) -> Outcome {
    var reader = HTTPResponseReader()
    var delivered = 0
    var outcome = Outcome()
    func fill(_ buffer: inout [UInt8]) throws {
        guard delivered < stream.count else { throw HTTPConnection.Failure.connectionLost("closed by the server") }
        let end = min(stream.count, delivered + piece)
        buffer += stream[delivered..<end]
        delivered = end
    }
    do {
        for _ in 0..<4 {
            let r = try reader.read(fill: fill)
            outcome.responses.append(.init(status: r.status, body: r.body, keepAlive: r.keepAlive))
            if !r.keepAlive { break }
        }
    } catch {
        outcome.error = String(describing: error)
    }
    return outcome
}
