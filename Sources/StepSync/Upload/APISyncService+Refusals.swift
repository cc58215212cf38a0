import Foundation
import StepLog

extension APISyncService {
    /// Settles a batch the server refused because of a sample (`refusal`):
    /// posts the sample the server named alone — refused alone, it is
    /// recorded rejected with the server's reason; accepted alone, the
    /// server's index was not to be trusted and the rest is bisected — then
    /// posts the rest, splitting again wherever a part is refused, until every
    /// sample of the batch is either acknowledged (marked synced) or refused
    /// on its own (marked rejected). Each part's marks are durable before the
    /// next part is sent. About two requests per refused sample; any other
    /// failure throws as for a whole batch.
    func settleRefused(_ batch: [StoredSample], _ refusal: SampleRefusal, _ summary: inout UploadSummary) async throws {
        var parts: [(samples: [StoredSample], refusal: SampleRefusal?)] = [(batch, refusal)]
        while let (part, known) = parts.popLast() {
            let refused: SampleRefusal?
            if let known { refused = known } else { refused = try await post(part, &summary) }
            guard let refused else { continue }
            if part.count == 1 {
                try reject(part[0], refused.reason, &summary)
                continue
            }
            if refused.index >= 0 && refused.index < part.count {
                var rest = part
                let named = rest.remove(at: refused.index)
                if let alone = try await post([named], &summary) {
                    try reject(named, alone.reason, &summary)
                    parts.append((rest, nil))
                    continue
                }
                parts += halves(rest)
            } else {
                parts += halves(part)
            }
        }
    }

    private func halves(_ samples: [StoredSample]) -> [(samples: [StoredSample], refusal: SampleRefusal?)] {
        guard !samples.isEmpty else { return [] }
        let middle = samples.count / 2
        return [(Array(samples[middle...]), nil), (Array(samples[..<middle]), nil)].filter { !$0.samples.isEmpty }
    }

    /// Posts `part` (with retries). Accepted: marks it synced, durably, and
    /// returns nil. Refused because of a sample: returns the refusal.
    private func post(_ part: [StoredSample], _ summary: inout UploadSummary) async throws -> SampleRefusal? {
        let samples = part.map(\.sample)
        let body = StepsRequestBody.encode(samples, uploader: client.uploader)
        do {
            let (response, retries) = try await BatchPoster.post(samples, body: body, client: client, retry: retry, sleep: sleep,
                                                                 onRetry: onRetry)
            summary.retries += retries
            summary.samplesSavedByServer += response.saved
            summary.samplesSynced += try store.markSynced(part)
            summary.batches += 1
            try store.sync()
            return nil
        } catch let error as APIError {
            guard let refusal = SampleRefusal(error) else { throw error }
            return refusal
        }
    }

    private func reject(_ sample: StoredSample, _ reason: String, _ summary: inout UploadSummary) throws {
        let recorded = try store.markRejected([(sample, reason)], at: Date())
        try store.sync()
        summary.samplesRejected += recorded
        if recorded > 0 && summary.firstRejections.count < 5 {
            summary.firstRejections.append(SampleRejection(id: sample.id, rejectedAtMilliseconds: Milliseconds.from(Date()), reason: reason))
        }
    }
}
