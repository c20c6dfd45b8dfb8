import Foundation

/// The origin (and optional path prefix) of every URL the server hands out: `redirectURL`, `webcourierURL`,
/// `websocketURL`, asset upload and download URLs, share URLs (`cloudlet serve --public-url`).
///
/// Never taken from the request's `Host` header, which the client chooses (host-header injection: a link in a
/// response pointing at a host the attacker named). Without a configured one, the server's own bound address is used
/// (``Server/url``); a cluster node defaults to its `--advertise` URL.
public struct PublicURL: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`.
    public let scheme: String
    /// `host` or `host:port` (an IPv6 address in brackets), as written.
    public let authority: String
    /// The path prefix, empty or `/a/b` (no trailing slash): a reverse proxy serves the server under it.
    public let pathPrefix: String

    /// `scheme://authority` + the path prefix; a route's path is appended to it.
    public var description: String { "\(scheme)://\(authority)\(pathPrefix)" }

    /// `ws` or `wss`, for websocket URLs.
    public var webSocketScheme: String { scheme == "https" ? "wss" : "ws" }

    /// The websocket URL of `pathAndQuery` (which starts with `/`).
    public func webSocket(_ pathAndQuery: String) -> String {
        "\(webSocketScheme)://\(authority)\(pathPrefix)\(pathAndQuery)"
    }

    /// Parses and checks `text`: scheme `http` or `https`, a host, an optional port (1–65535), an optional path
    /// prefix; no user info, query or fragment. A trailing `/` is dropped.
    /// - Throws: ``ServerSetupError`` naming what is wrong.
    public init(_ text: String) throws {
        func bad(_ why: String) -> ServerSetupError { ServerSetupError("public URL '\(text)' \(why)") }
        guard !text.isEmpty else { throw ServerSetupError("the public URL is empty") }
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw bad("has a space, a control character or a non-ASCII character (percent-encode it)")
        }
        guard let schemeEnd = text.range(of: "://") else { throw bad("has no scheme: write http://HOST or https://HOST") }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else { throw bad("has scheme '\(scheme)': it must be http or https") }
        let rest = text[schemeEnd.upperBound...]
        guard !rest.contains("?") else { throw bad("has a query ('?…'): give only scheme, host, port and path") }
        guard !rest.contains("#") else { throw bad("has a fragment ('#…'): give only scheme, host, port and path") }
        let authority = rest.prefix { $0 != "/" }
        var path = String(rest.dropFirst(authority.count))
        guard !authority.contains("@") else { throw bad("has user info ('…@'): credentials do not belong in it") }
        guard !authority.isEmpty else { throw bad("has no host") }
        // host, host:port, [v6], [v6]:port
        var host = Substring(authority)
        var port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw bad("has an unclosed '[' in its host") }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("has '\(after)' after its IPv6 address") }
                port = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        }
        guard host.count > (host.hasPrefix("[") ? 2 : 0) else { throw bad("has no host") }
        guard host.hasPrefix("[") || host.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" }) else {
            throw bad("has host '\(host)': only letters, digits, '.' and '-'")
        }
        if let port {
            guard let n = Int(port), port.allSatisfy(\.isASCII), (1...65535).contains(n) else {
                throw bad("has port '\(port)': it must be a number from 1 to 65535")
            }
        }
        while path.hasSuffix("/") { path.removeLast() }
        guard !path.contains("//"), !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
            throw bad("has path '\(path)' with an empty, '.' or '..' segment")
        }
        self.scheme = scheme
        self.authority = authority.lowercased()
        pathPrefix = path
    }
}

extension PublicURL {
    /// `http(s)://host:port` of a listening address; `0.0.0.0` (every interface) as `127.0.0.1`.
    init(listening host: String, port: Int, tls: Bool) {
        scheme = tls ? "https" : "http"
        authority = "\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)"
        pathPrefix = ""
    }
}
