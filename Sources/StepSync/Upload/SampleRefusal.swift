/// A 400 the server gave for one sample of a batch: its message names the
/// sample first, `samples[3].endDate: must not be before startDate (…)`
/// (the server validates the whole batch and names the first bad sample).
/// Any other 400 (a malformed body, too many samples) is about the request.
struct SampleRefusal: Equatable, Sendable {
    /// The sample's index in the batch as the server numbered it.
    var index: Int
    /// The message without the `samples[i].` prefix: `endDate: must not be …`.
    var reason: String

    init(index: Int, reason: String) {
        self.index = index
        self.reason = reason
    }

    init?(_ error: APIError) {
        guard case .serverError(400, let body?, _) = error else { return nil }
        self.init(message: APIError.oneLine(body))
    }

    init?(message: String) {
        let prefix = "samples["
        guard message.hasPrefix(prefix), let close = message.firstIndex(of: "]"),
              let index = Int(message[message.index(message.startIndex, offsetBy: prefix.count)..<close]) else { return nil }
        var reason = message[message.index(after: close)...]
        while let first = reason.first, first == "." || first == ":" || first == " " { reason = reason.dropFirst() }
        self.index = index
        self.reason = reason.isEmpty ? message : String(reason)
    }
}
