import CloudletCore
import CloudletModel
import CloudletWire
import Synchronization

/// A client of a `cloudlet serve` (or any server speaking CloudKit Web Services): containers and databases that
/// conform to the same ``CloudletDatabase`` protocol as the embedded engine's, so application code runs unchanged
/// against either.
///
/// ```swift
/// let client = CloudletClient(url: "http://127.0.0.1:8080", apiToken: apiToken, webAuthToken: webAuthToken)
/// let db = client.container("iCloud.com.example.notes").privateDatabase
/// let saved = try await db.save(Record(recordType: "Note", recordName: "n1", fields: ["title": .string("Hi")]))
/// ```
///
/// Errors are ``CloudletError`` with the engine's codes (the server names them in `cloudletErrorCode`; a plain
/// CloudKit server's `serverErrorCode` maps through ``ErrorTable``), conflicts carry the server's record, and batch
/// calls report per-item failures in their results. Throttling and unavailability are retried per
/// ``RetryPolicy``; cancelling the calling task cancels the request in flight.
public struct CloudletClient: Sendable {
    public struct Configuration: Sendable {
        /// PEM file of the certificate authorities to trust for `https` (nil: the system's).
        public var caFile: String?
        /// Whole-request timeout, seconds.
        public var timeout: Double = 120
        public var retry: RetryPolicy = .default

        public init(caFile: String? = nil, timeout: Double = 120, retry: RetryPolicy = .default) {
            self.caFile = caFile
            self.timeout = timeout
            self.retry = retry
        }
    }

    /// The server's base URL, without a trailing slash (`http://127.0.0.1:8080`).
    public let url: String
    let apiToken: String
    let webAuthToken: String?
    /// Signs every request instead of the tokens (``init(url:serverKey:configuration:)``).
    let serverKey: ServerKey?
    let retry: RetryPolicy
    let transport: any HTTPTransport
    /// The CA file of the client's own transport, for its websockets.
    let caFile: String?
    /// `?ckAPIToken=…&ckWebAuthToken=…`, escaped once (empty for a server-to-server client, whose requests are
    /// signed instead).
    let tokenQuery: String
    /// Notification courier tokens (`tokens/create`), one per container and environment, made on first use.
    let couriers = CourierTokens()

    /// A client over libcurl (``CurlTransport``).
    public init(url: String, apiToken: String, webAuthToken: String? = nil, configuration: Configuration = Configuration()) {
        var options = CurlTransport.Options(caFile: configuration.caFile)
        options.timeout = configuration.timeout
        self.init(
            url: url, apiToken: apiToken, webAuthToken: webAuthToken, transport: CurlTransport(options: options),
            retry: configuration.retry)
    }

    /// A server-to-server client: every request is signed with `serverKey` (no tokens) and acts on the public
    /// database as the container's developer, as CloudKit's server-to-server clients do.
    public init(url: String, serverKey: ServerKey, configuration: Configuration = Configuration()) {
        var options = CurlTransport.Options(caFile: configuration.caFile)
        options.timeout = configuration.timeout
        self.init(
            url: url, apiToken: "", webAuthToken: nil, serverKey: serverKey, transport: CurlTransport(options: options),
            retry: configuration.retry)
    }

    /// A client over any transport (tests use a scripted one).
    public init(
        url: String, apiToken: String, webAuthToken: String? = nil, serverKey: ServerKey? = nil, transport: any HTTPTransport,
        retry: RetryPolicy
    ) {
        var u = url
        while u.hasSuffix("/") { u.removeLast() }
        self.url = u
        self.apiToken = apiToken
        self.webAuthToken = webAuthToken
        self.serverKey = serverKey
        self.transport = transport
        self.retry = retry
        caFile = (transport as? CurlTransport)?.options.caFile
        var query = ""
        if serverKey == nil {
            query = "?ckAPIToken=" + RemoteDatabase.escape(apiToken)
            if let t = webAuthToken { query += "&ckWebAuthToken=" + RemoteDatabase.escape(t) }
        }
        tokenQuery = query
    }

    public func container(_ identifier: String, environment: Environment = .development) -> RemoteContainer {
        RemoteContainer(client: self, identifier: identifier, environment: environment)
    }
}

/// A container on the server, for one caller.
public struct RemoteContainer: Sendable {
    public let client: CloudletClient
    public let identifier: String
    public let environment: Environment

    public func database(_ scope: DatabaseScope) -> RemoteDatabase { RemoteDatabase(container: self, scope: scope) }
    public var publicDatabase: RemoteDatabase { database(.public) }
    public var privateDatabase: RemoteDatabase { database(.private) }
    public var sharedDatabase: RemoteDatabase { database(.shared) }
}

/// A courier token's two URLs (`tokens/create`): the long-poll's and the websocket's.
struct CourierURLs: Sendable {
    var poll: String
    var websocket: String
}

/// Courier tokens by container and environment. A server forgets them when it restarts (`AUTHENTICATION_FAILED`
/// on the poll): the client then drops its token and makes a new one.
final class CourierTokens: Sendable {
    private let tokens = Mutex<[String: CourierURLs]>([:])

    func get(_ key: String) -> CourierURLs? { tokens.withLock { $0[key] } }
    func set(_ key: String, _ urls: CourierURLs?) { tokens.withLock { $0[key] = urls } }
}
