import Foundation

/// Options of a ``Server``. Every default is what `cloudlet serve` uses.
public struct ServerConfiguration: Sendable {
    /// IPv4 address to listen on. Default `127.0.0.1` (this machine only); `0.0.0.0` for every interface.
    public var host = "127.0.0.1"
    /// TCP port. Default 8080; 0 picks a free one (see ``Server/port``).
    public var port = 8080
    /// PEM certificate (and chain) for HTTPS. Set together with ``tlsKeyPath``; nil (default): plain HTTP.
    public var tlsCertificatePath: String?
    /// PEM private key for HTTPS.
    public var tlsKeyPath: String?
    /// Whether the server speaks HTTPS (``tlsCertificatePath`` is set).
    var tls: Bool { tlsCertificatePath != nil }
    /// The origin (and optional path prefix) of every URL the server hands out: sign-in `redirectURL`, courier
    /// `webcourierURL` / `websocketURL`, asset upload and download URLs, share URLs (`cloudlet serve --public-url`).
    /// Default nil: the address the server listens on (``Server/url``). Never the request's `Host` header.
    public var publicURL: PublicURL?
    /// Worker threads: requests handled at once. Connections are not limited by it (an idle keep-alive, a waiting
    /// long poll or an open websocket holds no thread). Default 64.
    public var threads = 64
    /// Largest request body accepted; larger ones get HTTP 413. Default 16 MiB.
    public var maxBodySize = 16 << 20
    /// The byte budget of one response's records (``ServerConfiguration/defaultResponseBudget``, 4 MiB): a
    /// `records/query`, `changes/zone` or `records/changes` page ends early with `moreComing` / a continuation
    /// marker before the record that would pass it, and `records/lookup` answers the records past it with a
    /// per-record `LIMIT_EXCEEDED` error (look them up again). Counted as records' stored sizes; a page always
    /// carries at least one record. With a response built whole before it is written and one response per
    /// connection, this bounds what a request (or a client that never reads) can make the server hold.
    public var responseBudget = ServerConfiguration.defaultResponseBudget
    public static let defaultResponseBudget = 4 << 20
    /// Largest asset file an upload URL accepts, in bytes; a larger upload gets HTTP 413 naming the limit and
    /// nothing is kept. Uploads are streamed to disk, so this does not bound memory. Default 250 MB.
    public var maxAssetSize: Int64 = 250_000_000
    /// Asset uploads received at once; one more is answered 503 `TRY_AGAIN_LATER` with `Retry-After` before its body
    /// is read. With ``maxAssetSize`` it bounds the bytes in flight (each upload's partial file, and a 256 KiB buffer
    /// in memory). Default 16.
    public var maxConcurrentUploads = 16
    /// Seconds an asset upload URL, upload receipt or download URL stays valid. Keep it shorter than the store's
    /// ``StoreConfiguration/assetGracePeriod``. Default 15 minutes.
    public var assetURLLifetime: Double = 15 * 60
    /// Seconds a courier token (`tokens/create`, `tokens/register`) stays valid after its last use (creating or
    /// registering it, a long-poll or websocket opened with it). Default 24 hours.
    public var courierTokenLifetime: Double = CourierTokens.defaultLifetime
    /// Courier tokens one user holds in one container and environment; one more evicts the least recently used.
    /// Default 64.
    public var courierTokensPerUser = CourierTokens.defaultPerInboxCap
    /// The monotonic clock of courier token expiry, in seconds (tests move it).
    var courierClock: @Sendable () -> Double = RateLimiter.monotonicSeconds
    /// Seconds between the server's asset garbage collections (``CloudletStore/collectAssetGarbage(gracePeriod:)``);
    /// 0 turns them off. Default 1 hour.
    public var assetCollectionInterval: Double = 3600
    /// The longest pause between two pieces of a request body; a body that stops short is answered 408
    /// `REQUEST_TIMEOUT` (or fails its upload) after it. Default 30 s.
    public var requestTimeoutMilliseconds = 30_000
    /// A request's line and headers (and, over HTTPS, the TLS handshake before them) must arrive within this time
    /// of their first byte, else 408 `REQUEST_TIMEOUT` (slowloris). Default 10 s.
    public var headerTimeoutMilliseconds = 10_000
    /// An idle keep-alive connection is closed after this time, and so is one whose client stops reading its
    /// answer for this long. Default 5 s.
    public var keepAliveTimeoutMilliseconds = 5_000
    /// Connections open at once from one IP address; one more is answered 503 `SERVICE_UNAVAILABLE` and closed.
    /// 0: no cap. Behind a reverse proxy every client has the proxy's address: raise it or set 0. Default 1,024.
    public var maxConnectionsPerPeer = 1_024
    /// Sees every request before the router: answers it itself, or hands it on to `next` (the router) and may change
    /// the answer. The cluster (CloudletCluster's `ClusterNode`) forwards writes and serves its own endpoints
    /// through it. Default nil.
    public var interceptor: (@Sendable (HTTPRequest, _ next: (HTTPRequest) -> HTTPResponse) -> HTTPResponse)?
    /// More Prometheus text, appended to `/cloudlet/metrics` and to what the console's Health page samples: the
    /// cluster's replication metrics (`cloudlet serve --cluster` sets it to the node's). Called for every scrape,
    /// from the request's thread. Default nil.
    public var additionalMetrics: (@Sendable () -> String)?
    /// Where the access log (one line per request, see `RequestLog`) and the front end's messages go. Default: standard
    /// error. nil: no access log.
    public var log: (@Sendable (String) -> Void)? = ServerConfiguration.standardError

    /// Per-caller request rate limits (``RateLimit``); nil (the default): none. Callers are users, server-to-server
    /// keys and API tokens used without a user, each limited on its own.
    public var rateLimit: RateLimit?

    /// A token bucket per caller: `requestsPerSecond` sustained, `burst` at once.
    public struct RateLimit: Sendable, Hashable {
        public var requestsPerSecond: Double
        public var burst: Int
        public init(requestsPerSecond: Double, burst: Int) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
        }
    }

    /// The storage quota of each user's private database, in bytes of stored records (``UserQuota``); nil (the
    /// default): none.
    public var userQuota: Int?

    public init() {}

    /// Writes a line to standard error with one `write(2)`, so lines from concurrent requests never interleave.
    /// (The line and its newline are put together in a temporary buffer, on the stack for a line of an access log: no
    /// allocation per line.)
    public static let standardError: @Sendable (String) -> Void = { line in
        var line = line
        line.withUTF8 { text in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count + 1) { bytes in
                _ = bytes.initialize(fromContentsOf: text)
                bytes[text.count] = 10
                var offset = 0
                while offset < bytes.count {
                    let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
                    if n <= 0 { return }
                    offset += n
                }
            }
        }
    }
}
