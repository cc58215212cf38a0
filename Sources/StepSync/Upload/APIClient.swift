import Foundation
import StepLog

/// The API the upload talks to (seed 002's `APIClient`).
///
/// Conforming types guarantee: `postSteps` returns only after the server
/// acknowledged the batch (HTTP 200), so a caller may then mark the samples
/// synced; anything else throws an `APIError`. Posting the same samples again
/// is safe (the server is idempotent by sample id).
public protocol APIClient: Sendable {
    /// `POST /steps` with the samples in the API's JSON shape.
    func postSteps(_ samples: [StepSample]) async throws -> StepSampleResponse

    /// `POST /steps` with a body the caller already encoded with
    /// `StepsRequestBody.encode(samples)`, so that encoding can overlap another
    /// request. Clients that do not send JSON ignore the body.
    func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse

    /// `POST /steps/deletions` with at most 1,000 sample ids: returns only
    /// after the server made the deletions durable (HTTP 200), so a caller may
    /// then mark them acknowledged. Idempotent: unknown or already deleted ids
    /// are acknowledged too.
    func postDeletions(_ ids: [UUID]) async throws -> DeletionResponse

    /// `GET /steps?limit=&offset=`: stored samples in the order received.
    func getSteps(limit: Int, offset: Int) async throws -> StepSampleListResponse

    /// `GET /health`: true when the server answers `{"status":"ok"}`.
    func healthCheck() async throws -> Bool
}

extension APIClient {
    public func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse {
        try await postSteps(samples)
    }
}

/// The request body of `POST /steps/deletions`: `{"ids":[…]}`.
public enum DeletionsRequestBody {
    public static func encode(_ ids: [UUID]) -> Data {
        var w = JSONWriter(capacity: ids.count * 40 + 16)
        w.beginObject()
        w.key("ids")
        w.beginArray()
        for id in ids { w.value(id.uuidString) }
        w.endArray()
        w.endObject()
        return Data(w.bytes)
    }
}

/// The request body of `POST /steps`: `{"samples":[…]}`, built without
/// Foundation's encoder (an upload of 10 GB builds it 100,000 times).
public enum StepsRequestBody {
    public static func encode(_ samples: [StepSample]) -> Data {
        var w = JSONWriter(capacity: samples.count * 200 + 16)
        w.beginObject()
        w.key("samples")
        w.beginArray()
        for s in samples { SampleJSON.write(s, into: &w) }
        w.endArray()
        w.endObject()
        return Data(w.bytes)
    }
}
