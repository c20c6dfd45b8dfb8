import Synchronization

/// Where the URLs a server hands out point (``PublicURL``): ``ServerConfiguration/publicURL`` when set, else the
/// address the server listens on. Never the request's `Host` header.
final class ServerOrigin: Sendable {
    /// The configured public URL, or the listening address when its port is known before binding; and its text.
    private let fixed: (url: PublicURL, text: String)?
    /// The listening address once bound, for a server configured with port 0: set once, then read without a lock
    /// (every lookup's share viewer reads the text; a `Mutex` here was contended by 32 workers).
    private let bound = AtomicLazyReference<Bound>()

    private final class Bound: Sendable {
        let url: PublicURL
        let text: String
        init(_ url: PublicURL) {
            self.url = url
            text = url.description
        }
    }

    private let configuration: ServerConfiguration

    init(_ configuration: ServerConfiguration) {
        self.configuration = configuration
        let url = configuration.publicURL
            ?? (configuration.port == 0 ? nil : PublicURL(listening: configuration.host, port: configuration.port, tls: configuration.tls))
        fixed = url.map { ($0, $0.description) }
    }

    /// Called once the listener is bound to `port` (the first call counts).
    func bind(port: Int) {
        guard fixed == nil else { return }
        _ = bound.storeIfNil(Bound(PublicURL(listening: configuration.host, port: port, tls: configuration.tls)))
    }

    var url: PublicURL { current.url }

    /// ``url`` as text, built once: read by every answer that writes records (the share viewer) and by those that
    /// hand out URLs.
    var text: String { current.text }

    private var current: (url: PublicURL, text: String) {
        if let fixed { return fixed }
        if let b = bound.load() { return (b.url, b.text) }
        // Port 0 and not bound yet: no client can know the port, so nothing can be asked of this URL yet.
        let url = PublicURL(listening: configuration.host, port: 0, tls: configuration.tls)
        return (url, url.description)
    }
}
