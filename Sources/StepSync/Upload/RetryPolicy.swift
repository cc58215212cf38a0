import Foundation

/// Bounded exponential backoff with full jitter for retryable failures
/// (connection errors, timeouts, 5xx): attempt n waits a random time in
/// [0, min(maxDelay, initialDelay · 2ⁿ⁻¹)], so many clients retrying at once
/// spread out instead of arriving together.
public struct RetryPolicy: Sendable {
    /// Attempts per request, the first included.
    public var maxAttempts: Int
    public var initialDelay: Double
    public var maxDelay: Double

    public init(maxAttempts: Int = 8, initialDelay: Double = 0.25, maxDelay: Double = 15) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The longest wait before attempt `attempt` (2, 3, …).
    public func ceiling(beforeAttempt attempt: Int) -> Double {
        min(maxDelay, initialDelay * pow(2, Double(max(0, attempt - 2))))
    }

    /// A jittered wait before attempt `attempt`.
    public func delay<G: RandomNumberGenerator>(beforeAttempt attempt: Int, using rng: inout G) -> Double {
        Double.random(in: 0...ceiling(beforeAttempt: attempt), using: &rng)
    }
}
