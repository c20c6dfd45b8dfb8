import CCivetweb
import Cloudlet

/// A complete HTTP response: status, content type, extra headers and body (sent with a `Content-Length`).
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Close the connection after this response (for a request whose body was not read).
    public var closeConnection: Bool
    /// A body written in pieces instead of ``body`` (a file being downloaded).
    var stream: HTTPResponseStream?

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

/// A response body of a known length written in pieces: `write` is called once, on the listener's thread, with a
/// function that sends bytes and returns false once the client is gone.
struct HTTPResponseStream: Sendable {
    var length: Int64
    var write: @Sendable (_ send: (UnsafeRawBufferPointer) -> Bool) -> Void
}

/// The body of a request that its handler reads itself, in pieces (`mg_read`), on the listener's thread while the
/// handler runs. `@unchecked Sendable`: only the one civetweb thread serving the request uses it.
final class HTTPBodyStream: @unchecked Sendable {
    private let connection: OpaquePointer
    /// The `Content-Length`, or nil for a chunked body.
    let declaredLength: Int64?
    private(set) var received: Int64 = 0
    /// Whether the body was read to its end (else the connection cannot be kept alive).
    private(set) var finished = false

    init(connection: OpaquePointer, declaredLength: Int64?) {
        self.connection = connection
        self.declaredLength = declaredLength
        if declaredLength == 0 { finished = true }
    }

    /// Reads up to `buffer.count` bytes; 0 at the end of the body. - Throws: when the client stops sending before
    /// its declared length.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if finished { return 0 }
        var want = buffer.count
        if let declaredLength { want = Int(min(Int64(want), declaredLength - received)) }
        let n = want == 0 ? 0 : Int(mg_read(connection, buffer.baseAddress, want))
        if n <= 0 {
            if let declaredLength, received < declaredLength {
                throw CloudletError.invalid("the request body ended after \(received) of its \(declaredLength) bytes")
            }
            finished = true
            return 0
        }
        received += Int64(n)
        if let declaredLength, received == declaredLength { finished = true }
        return n
    }
}
