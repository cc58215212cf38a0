import Foundation
import StepLog

/// The API the upload talks to (seed 002's `APIClient`).
///
/// Conforming types guarantee: `postSteps` returns only after the server
/// acknowledged the batch (HTTP 200), so a caller may then mark the samples
/// synced; anything else throws an `APIError`. Posting the same samples again
/// is safe (the server is idempotent by sample id).
public protocol APIClient: Sendable {
    /// The store this client writes for (its uploader id, docs/RECONCILE.md),
    /// sent in every `POST /steps` and `POST /steps/deletions` body; nil sends none.
    var uploader: String? { get }

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

    /// `GET /steps/digest?uploader=`: who answers (server id, user) and the
    /// digest of what `uploader` last wrote there.
    func digest(uploader: String) async throws -> UploaderDigestResponse

    /// `GET /steps/digest/days`: the digest of each UTC day holding samples
    /// `uploader` last wrote, after the day `after` (a page).
    func dayDigests(uploader: String, after: String?) async throws -> DayDigestsPage

    /// `GET /steps/digest/samples`: ids and content hashes of the samples
    /// `uploader` last wrote that start on `day`, after the id `after` (a page).
    func daySamples(uploader: String, day: String, after: String?) async throws -> DaySamplesPage

    /// `POST /steps/digest/lookup` of at most 1,000 ids: what the server
    /// knows of each (live or deleted, and by whom); unknown ids are left out.
    func lookup(_ ids: [UUID]) async throws -> LookupResponse
}

extension APIClient {
    public var uploader: String? { nil }

    public func postSteps(_ samples: [StepSample], encodedBody: Data) async throws -> StepSampleResponse {
        try await postSteps(samples)
    }
}

/// The request body of `POST /steps/deletions`: `{"uploader":…,"ids":[…]}`;
/// without an uploader also that of `POST /steps/digest/lookup`.
public enum DeletionsRequestBody {
    public static func encode(_ ids: [UUID], uploader: String? = nil) -> Data {
        var w = JSONWriter(capacity: ids.count * 40 + 64)
        w.beginObject()
        if let uploader { w.field("uploader", uploader) }
        w.key("ids")
        w.beginArray()
        for id in ids { w.value(id.uuidString) }
        w.endArray()
        w.endObject()
        return Data(w.bytes)
    }
}

/// The request body of `POST /steps`: `{"uploader":…,"samples":[…]}`, built without
/// Foundation's encoder (an upload of 10 GB builds it 100,000 times).
public enum StepsRequestBody {
    public static func encode(_ samples: [StepSample], uploader: String? = nil) -> Data {
        var w = JSONWriter(capacity: samples.count * 200 + 64)
        w.beginObject()
        if let uploader { w.field("uploader", uploader) }
        w.key("samples")
        w.beginArray()
        for s in samples { SampleJSON.write(s, into: &w) }
        w.endArray()
        w.endObject()
        return Data(w.bytes)
    }
}
