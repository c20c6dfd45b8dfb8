import Synchronization

/// Per-caller request rate limits: a token bucket per caller (a user, a server-to-server key, or an API token used
/// without a user), refilled at ``ServerConfiguration/RateLimit/requestsPerSecond`` up to
/// ``ServerConfiguration/RateLimit/burst``. A request that finds its bucket empty is answered `THROTTLED` with
/// `retryAfter`, the seconds until a token is back.
///
/// Memory is bounded: past ``maxCallers`` buckets, the full ones (callers idle long enough to have refilled) are
/// dropped, which forgets nothing that matters.
final class RateLimiter: Sendable {
    let limit: ServerConfiguration.RateLimit
    /// Seconds on a monotonic clock (injected by tests).
    private let now: @Sendable () -> Double
    private let buckets = Mutex([String: Bucket]())
    static let maxCallers = 100_000

    private struct Bucket {
        var tokens: Double
        var at: Double
    }

    init(_ limit: ServerConfiguration.RateLimit, now: @escaping @Sendable () -> Double = RateLimiter.monotonicSeconds) {
        precondition(limit.requestsPerSecond > 0 && limit.burst >= 1)
        self.limit = limit
        self.now = now
    }

    private static let origin = ContinuousClock.now
    static let monotonicSeconds: @Sendable () -> Double = {
        let d = ContinuousClock.now - origin
        return Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18
    }

    /// Takes a token for `caller`: nil when the request may go ahead, else the seconds until it may.
    func admit(_ caller: String) -> Double? {
        let t = now()
        let (rate, burst) = (limit.requestsPerSecond, Double(limit.burst))
        return buckets.withLock { all -> Double? in
            var b = all[caller] ?? Bucket(tokens: burst, at: t)
            b.tokens = min(burst, b.tokens + (t - b.at) * rate)
            b.at = t
            defer {
                all[caller] = b
                if all.count > Self.maxCallers {
                    all = all.filter { min(burst, $0.value.tokens + (t - $0.value.at) * rate) < burst }
                }
            }
            guard b.tokens >= 1 else { return (1 - b.tokens) / rate }
            b.tokens -= 1
            return nil
        }
    }
}
