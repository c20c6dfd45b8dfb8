import CEventHTTP
import Cloudlet
import Glibc
import Synchronization

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
    /// A body sent from an open file by the front end's loop instead of ``body`` (an asset download).
    var file: HTTPFileBody?
    /// The answer, awaited later without holding a worker thread (a long poll); see ``later(_:)``.
    var later: (@Sendable () async -> HTTPResponse)?

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

extension HTTPResponse {
    /// An answer that `produce` gives later: the listener awaits it on a task and frees its worker thread
    /// meanwhile (a long poll waiting for notifications holds a connection, not a thread).
    static func later(_ produce: @escaping @Sendable () async -> HTTPResponse) -> HTTPResponse {
        var r = HTTPResponse(status: 200, body: [])
        r.later = produce
        return r
    }
}

/// A response body of a known length written in pieces: `write` is called once, on the listener's thread, with a
/// function that sends bytes and returns false once the client is gone.
struct HTTPResponseStream: Sendable {
    var length: Int64
    var write: @Sendable (_ send: (UnsafeRawBufferPointer) -> Bool) -> Void
}

/// A response body that the front end's loop reads from an open file and sends (`eh_conn_send_file`): the worker
/// that answered is free at once, a client that reads slowly holds at most the output cap of memory and no thread,
/// and the bytes go from the file to the socket (or TLS) without passing through Swift. Owns its descriptor until
/// the listener hands it over; closes it if it never is.
final class HTTPFileBody: Sendable {
    let offset: Int64
    let length: Int64
    private let descriptor: Atomic<Int32>

    init(descriptor: Int32, offset: Int64, length: Int64) {
        self.descriptor = Atomic(descriptor)
        self.offset = offset
        self.length = length
    }

    /// The descriptor, which the caller now owns; -1 once taken.
    func take() -> Int32 { descriptor.exchange(-1, ordering: .acquiringAndReleasing) }

    deinit {
        let fd = take()
        if fd >= 0 { Glibc.close(fd) }
    }
}

/// The body of a request that its handler reads itself, in pieces (`eh_body_read`, `eh_body_take`), on the worker
/// thread while the handler runs; the loop pauses reading from a client that is ahead of the handler.
/// `@unchecked Sendable`: only the one worker thread serving the request uses it.
final class HTTPBodyStream: @unchecked Sendable {
    private let request: UnsafeMutablePointer<eh_request>
    /// The `Content-Length`, or nil for a chunked body.
    let declaredLength: Int64?
    private(set) var received: Int64 = 0
    /// Whether the body was read to its end (else the connection cannot be kept alive).
    private(set) var finished = false

    init(request: UnsafeMutablePointer<eh_request>, declaredLength: Int64?) {
        self.request = request
        self.declaredLength = declaredLength
        if declaredLength == 0 { finished = true }
    }

    /// The buffer ``nextPiece(atLeast:)`` last took from the front end (`malloc`'d; the front end fills the one
    /// before it meanwhile).
    private var piece: UnsafeMutableRawPointer?
    private var pieceCapacity = 0

    deinit { free(piece) }

    /// Reads up to `buffer.count` bytes; 0 at the end of the body. - Throws: when the client stops sending before
    /// the end of its body (the front end's body timeout) or goes away.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        if finished || buffer.count == 0 { return 0 }
        return try counted(eh_body_read(request, buffer.baseAddress, buffer.count))
    }

    /// The next piece of the body, without copying it: the front end's own buffer, once it holds `atLeast` bytes
    /// (at most 256 KiB) or the body ends, exchanged for the one the previous call returned. Valid until the next
    /// call; empty at the end of the body. - Throws: as ``read(into:)``.
    func nextPiece(atLeast: Int) throws -> UnsafeRawBufferPointer {
        if finished { return UnsafeRawBufferPointer(start: nil, count: 0) }
        var capacity = pieceCapacity
        let n = try counted(eh_body_take(request, &piece, &capacity, atLeast))
        pieceCapacity = capacity
        return UnsafeRawBufferPointer(start: piece, count: n)
    }

    /// The count `eh_body_read`/`eh_body_take` returned, checked and added to ``received``.
    private func counted(_ n: Int) throws -> Int {
        if n < 0 {
            let of = declaredLength.map { " of its \($0)" } ?? ""
            throw CloudletError.invalid("the request body stopped after \(received)\(of) bytes")
        }
        if n == 0 {
            if let declaredLength, received < declaredLength {
                throw CloudletError.invalid("the request body ended after \(received) of its \(declaredLength) bytes")
            }
            finished = true
            return 0
        }
        received += Int64(n)
        if let declaredLength, received >= declaredLength { finished = true }
        return n
    }
}
