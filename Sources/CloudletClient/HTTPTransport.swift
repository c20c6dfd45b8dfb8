import CloudletCore

/// One HTTP request as the client sends it.
public struct HTTPClientRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// A file sent as the body, streamed from disk (instead of ``body``).
    public var bodyFile: String?
    /// Where a 200 response's body goes, streamed to disk (the response's ``HTTPClientResponse/body`` is then
    /// empty); any other response's body is read as usual.
    public var responseFile: String?

    public init(
        method: String, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
        bodyFile: String? = nil, responseFile: String? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bodyFile = bodyFile
        self.responseFile = responseFile
    }
}

/// One HTTP response: the status of the final response (after any `100 Continue`), its headers and body.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header of that name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// What sends requests for a ``CloudletClient``: ``CurlTransport`` (libcurl), or a test double.
///
/// `send` returns any HTTP response, whatever its status; it throws only when there is none: a
/// ``TransportFailure`` saying how far the exchange got (so that a retry never applies a write twice), or
/// `CancellationError` when the calling task was cancelled.
public protocol HTTPTransport: Sendable {
    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse
}

/// Why a transport produced no response, as far as a retry is concerned.
public struct TransportFailure: Error, Sendable, CustomStringConvertible {
    public enum Stage: Sendable {
        /// No connection was made (refused, DNS, connect timeout): the server has not seen the request.
        case connecting
        /// The connection failed after the request may have been sent: a write may or may not have been applied.
        case exchanging
        /// TLS: the server's certificate is not trusted, or the handshake failed. Retrying will not help.
        case tls
    }

    public var stage: Stage
    public var message: String

    public init(_ stage: Stage, _ message: String) {
        self.stage = stage
        self.message = message
    }

    public var description: String { message }

    /// The error a caller sees once retries are over.
    public var cloudletError: CloudletError {
        switch stage {
        case .connecting, .exchanging: CloudletError(.serviceUnavailable, message, cause: self)
        case .tls: CloudletError(.authenticationFailed, message, cause: self)
        }
    }
}

extension Substring {
    /// Without the spaces, tabs and line ends around it (a header's value). By UTF-8 bytes: a `Set<Character>` of
    /// blanks made per call cost ~8 k instructions a header line (callgrind).
    func trimmingHTTPWhitespace() -> String {
        func blank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
        var bytes = utf8[...]
        while let b = bytes.first, blank(b) { bytes = bytes.dropFirst() }
        while let b = bytes.last, blank(b) { bytes = bytes.dropLast() }
        return String(Substring(bytes))
    }
}
