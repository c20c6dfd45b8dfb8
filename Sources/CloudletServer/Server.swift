import Cloudlet
import Foundation
import Synchronization

/// Cloudlet's HTTP(S) server: the CloudKit Web Services API over an open ``CloudletStore``, plus health and
/// Prometheus metrics under `/cloudlet/`.
///
/// ```swift
/// let store = try await CloudletStore.open(at: "/var/lib/cloudlet")
/// var config = ServerConfiguration()
/// config.port = 0
/// let server = try Server(store: store, configuration: config)
/// try server.start()
/// print(server.url)               // http://127.0.0.1:41234
/// …
/// server.stop()                   // finishes requests in flight
/// try await store.close()
/// ```
///
/// Connections are held by the event-driven front end (``HTTPListener``); requests run on its worker threads
/// (``ServerConfiguration/threads``); engine calls go to Swift tasks. The server never closes the store: stop the server, then close the store.
public final class Server: Sendable {
    /// Where asset upload and download URLs live (checked with the asset signing key; streamed, not read whole).
    public static let assetPathPrefix = AssetTransfer.streamedPrefix

    public let store: CloudletStore
    public let configuration: ServerConfiguration
    /// The users and API tokens of this store.
    public var credentials: Credentials { Credentials(store: store) }
    private let listener: HTTPListener
    let courier: NotificationCourier
    /// Where the URLs in answers point, once bound (``ServerConfiguration/publicURL``).
    private let origin: ServerOrigin
    /// The request counters and gauges of `/cloudlet/metrics`.
    let metrics: Metrics
    /// Signs and checks asset upload URLs, receipts and download URLs.
    private let assetSigner: AssetSigner
    /// The periodic asset garbage collection (``ServerConfiguration/assetCollectionInterval``), while started.
    private let collector = Mutex<Task<Void, Never>?>(nil)

    /// - Throws: ``ServerSetupError`` when only one of the TLS certificate and key is given.
    public init(store: CloudletStore, configuration: ServerConfiguration = ServerConfiguration()) throws {
        self.store = store
        self.configuration = configuration
        var options = HTTPListener.Options()
        options.host = configuration.host
        options.port = configuration.port
        options.threads = configuration.threads
        options.maxBodySize = configuration.maxBodySize
        options.headerTimeoutMs = configuration.headerTimeoutMilliseconds
        options.bodyTimeoutMs = configuration.requestTimeoutMilliseconds
        options.keepAliveTimeoutMs = configuration.keepAliveTimeoutMilliseconds
        options.maxConnectionsPerPeer = configuration.maxConnectionsPerPeer
        switch (configuration.tlsCertificatePath, configuration.tlsKeyPath) {
        case (nil, nil): break
        case (let cert?, let key?): options.tls = HTTPListener.TLSFiles(certificate: cert, key: key)
        default: throw ServerSetupError("HTTPS needs both a certificate and a private key")
        }
        let router = try APIRouter(store: store, configuration: configuration)
        options.streamedPathPrefix = AssetTransfer.streamedPrefix
        let log = configuration.log ?? { _ in }
        courier = router.courier
        origin = router.origin
        metrics = router.metrics
        assetSigner = router.assets.signer
        let feed = WebSocketFeed(courier: router.courier, metrics: router.metrics)
        let changes = ConsoleChangeFeed(router: router)
        let handler: @Sendable (HTTPRequest) -> HTTPResponse
        if let intercept = configuration.interceptor {
            handler = { intercept($0, router.handle) }
        } else {
            handler = router.handle
        }
        listener = HTTPListener(
            options: options, log: { log("http: " + $0) }, webSockets: [feed.endpoint, changes.endpoint],
            handler: handler)
    }

    /// Signs and checks asset URLs and receipts with `key` (at least 16 bytes) instead of the store's own secret
    /// (`assets/signing.key`): the nodes of a cluster use one key derived from the cluster's, so a download URL or an
    /// upload receipt one node issued is taken by any other. What was signed with the previous key is refused.
    public func useAssetSigningKey(_ key: [UInt8]) { assetSigner.rekey(key) }

    /// Binds the port and starts serving. - Throws: ``ServerSetupError`` (port in use, bad certificate, no TLS).
    public func start() throws {
        try listener.start()
        origin.bind(port: listener.port)
        startAssetCollection()
    }

    /// Stops accepting connections, waits for the requests being handled to finish, closes every connection (idle
    /// keep-alives, long polls, websockets) and returns. Idempotent.
    public func stop() {
        collector.withLock { task in
            task?.cancel()
            task = nil
        }
        listener.stop()
    }

    /// Collects unreferenced asset files every ``ServerConfiguration/assetCollectionInterval`` seconds, keeping
    /// those younger than the store's grace window or the URL lifetime (plus a minute), whichever is longer, so
    /// that a receipt can be used for as long as it is valid.
    private func startAssetCollection() {
        let interval = configuration.assetCollectionInterval
        guard interval > 0, !store.configuration.readOnly else { return }
        let grace = max(store.configuration.assetGracePeriod, configuration.assetURLLifetime + 60)
        let (store, log) = (store, configuration.log)
        let task = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(interval))
                if Task.isCancelled { return }
                do {
                    let r = try await store.collectAssetGarbage(gracePeriod: grace)
                    if r.deletedFiles > 0 { log?("assets: deleted \(r.deletedFiles) unreferenced files (\(r.deletedBytes) bytes)") }
                } catch {
                    log?("assets: garbage collection failed: \(error)")
                }
            }
        }
        collector.withLock { $0 = task }
    }

    /// The port listened on (the real one when configured with 0); 0 before ``start()``.
    public var port: Int { listener.port }

    /// The address listened on as a URL, e.g. `https://127.0.0.1:8443` (with `127.0.0.1` for a server listening on
    /// `0.0.0.0`).
    public var url: String { PublicURL(listening: configuration.host, port: port, tls: configuration.tls).description }

    /// The origin of the URLs the server hands out: ``ServerConfiguration/publicURL``, else ``url``.
    public var publicURL: String { origin.text }
}

extension Server {
    /// A web-courier token for a user's notifications, as `tokens/create` would return (for in-process clients and
    /// benchmarks that connect to `/cloudlet/notifications/ws`).
    public func courierToken(container: String, environment: CloudletCore.Environment, user: String) throws -> String {
        try courier.createToken(NotificationHub.Inbox(container: container, environment: environment, user: user))
    }
}
