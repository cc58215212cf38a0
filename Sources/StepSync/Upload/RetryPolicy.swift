import Foundation

/// Bounded exponential backoff with full jitter for retryable failures
/// (connection errors, timeouts, 5xx): attempt n waits a random time in
/// [0, min(maxDelay, initialDelay · 2ⁿ⁻¹)], so many clients retrying at once
/// spread out instead of arriving together. An answer's Retry-After (the
/// server's 503 while its database fails over, HAProxy's while no server is
/// healthy) is the least wait, up to maxDelay: the attempts then last at
/// least (maxAttempts − 1) × Retry-After, which is how a client's retries
/// ride through a failover whose length the server knows better than it.
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

    /// A jittered wait before attempt `attempt`, at least `retryAfter` (the failed answer's
    /// Retry-After, capped at maxDelay).
    public func delay<G: RandomNumberGenerator>(beforeAttempt attempt: Int, retryAfter: Double? = nil, using rng: inout G) -> Double {
        max(Double.random(in: 0...ceiling(beforeAttempt: attempt), using: &rng), min(retryAfter ?? 0, maxDelay))
    }
}
