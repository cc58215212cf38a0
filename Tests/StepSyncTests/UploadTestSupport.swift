import Foundation
@testable import StepLog
@testable import StepSync

/// What the upload suites share: "now" at noon of the mock's last day, a store
/// filled from the mock through layering and fetch, and a sync service with
/// millisecond back-off and no real sleeping.
let uploadTestNow = Milliseconds.date(testEndDay * day + 12 * 3_600_000)

func ingestedStore(days: Int) async throws -> (TemporaryDirectory, StepLogStore) {
    let dir = TemporaryDirectory()
    let store = try StepLogStore.open(dir.path)
    try await LayeringService(provider: mock(days: days), store: store, now: { uploadTestNow }).performLayering()
    try await FetchService(provider: mock(days: days), store: store).fetchPending()
    return (dir, store)
}

/// One request in flight unless asked (the suites that script faults by the
/// order of the calls; UploadPipelineTests keeps several out).
func uploadService(_ store: StepLogStore, _ client: APIClient, attempts: Int = 8, inFlight: Int = 1,
                   stop: StopSignal? = nil) -> APISyncService {
    APISyncService(store: store, client: client, retry: RetryPolicy(maxAttempts: attempts, initialDelay: 0.001, maxDelay: 0.002),
                   inFlight: inFlight, stop: stop, sleep: { _ in })
}
