/// When and how long the client waits before sending a request again, as CloudKit tells its apps to: on `THROTTLED`,
/// `TRY_AGAIN_LATER` (`SERVICE_UNAVAILABLE`) and `ZONE_BUSY`, honouring the server's `retryAfter` when it gives one,
/// else backing off exponentially with jitter; and when the server could not be reached at all.
///
/// A failure after the request may have reached the server (the connection broke mid-exchange) is retried only for
/// requests that change nothing (lookups, queries, change feeds): retrying a write then could apply it twice.
public struct RetryPolicy: Sendable, Hashable {
    /// Tries in all, the first included (1: never retry).
    public var maxAttempts: Int
    /// The first backoff, seconds, when the server gives no `retryAfter`.
    public var initialDelay: Double
    /// The longest single wait, seconds (a `retryAfter` above it is cut to it).
    public var maxDelay: Double
    /// Each backoff is this many times the one before.
    public var multiplier: Double

    public init(maxAttempts: Int = 5, initialDelay: Double = 0.1, maxDelay: Double = 30, multiplier: Double = 2) {
        precondition(maxAttempts >= 1, "maxAttempts must be at least 1")
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
        self.multiplier = multiplier
    }

    public static let `default` = RetryPolicy()
    /// One try: errors come back as they are.
    public static let never = RetryPolicy(maxAttempts: 1)

    /// The wait before try `attempt + 1` (after `attempt` tries failed, from 1): `retryAfter` if the server named
    /// one, else `initialDelay × multiplier^(attempt−1)` scaled by `jitter` (from 0.5 to 1, drawn by the caller);
    /// never more than `maxDelay`.
    public func delay(afterAttempt attempt: Int, retryAfter: Double?, jitter: Double) -> Double {
        if let retryAfter, retryAfter >= 0 { return min(retryAfter, maxDelay) }
        var d = initialDelay
        for _ in 1..<max(1, attempt) { d *= multiplier }
        return min(d * jitter, maxDelay)
    }
}
