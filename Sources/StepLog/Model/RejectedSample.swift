/// A live sample whose current version the server rejected, with the rejection.
public struct RejectedSample: Hashable, Sendable {
    public var sample: StoredSample
    public var rejection: SampleRejection

    public init(sample: StoredSample, rejection: SampleRejection) {
        self.sample = sample
        self.rejection = rejection
    }
}
