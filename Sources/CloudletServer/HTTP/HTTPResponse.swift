/// A complete HTTP response: status, content type, extra headers and body (sent with a `Content-Length`).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this response (for a request whose body was not read).
    public var closeConnection: Bool

    public init(
        status: Int, contentType: String = "application/json; charset=utf-8", headers: [(String, String)] = [],
        body: [UInt8], closeConnection: Bool = false
    ) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
        self.closeConnection = closeConnection
    }

    /// A `text/plain` response.
    public static func text(_ s: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, contentType: contentType, body: Array(s.utf8))
    }
}
