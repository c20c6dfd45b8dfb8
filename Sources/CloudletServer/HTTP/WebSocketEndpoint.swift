import CEventHTTP
import CloudletWire
import COpenSSL
import Foundation

/// A websocket path on the listener whose connections only receive: on the handshake ``accept`` decides whether to
/// take the connection and what to run for it; once the connection is open, that runs as a ``ConnectionTask``
/// (on ``DedicatedExecutor/push``), sending text messages until it returns (then the server closes the websocket);
/// the task is cancelled when the connection closes, so a pusher waits for something to send or for cancellation,
/// never polling ``WebSocketConnection/isClosed``.
///
/// The front end's loop answers pings and close frames; a pusher holds no thread while it waits (it awaits), and
/// ``WebSocketConnection/send(_:)`` queues without blocking. Used by the notification feed (``WebSocketFeed``) and
/// the console's change feed (``ConsoleChangeFeed``).
final class WebSocketEndpoint: Sendable {
    /// What runs for an accepted connection.
    typealias Pusher = @Sendable (WebSocketConnection) async -> Void

    static let acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    let path: String
    /// Called on the handshake (on a worker thread, which may block): the pusher, or nil to refuse the connection.
    let accept: @Sendable (HTTPRequest) -> Pusher?

    init(path: String, accept: @escaping @Sendable (HTTPRequest) -> Pusher?) {
        self.path = path
        self.accept = accept
    }

    /// Answers handshake `request` on `conn`: 101 and the pusher, or a JSON error (then the connection closes).
    func handshake(_ request: HTTPRequest, connection conn: OpaquePointer, listener: HTTPListener) {
        guard request.method == "GET", let key = request.webSocketKey, !key.isEmpty else {
            let refusal = APIError.badRequest("a websocket handshake is a GET with Sec-WebSocket-Key").response
            return listener.write(refusal, to: conn, request: request, keepAlive: false)
        }
        guard let pusher = accept(request) else {
            let refusal = APIError("AUTHENTICATION_FAILED", "the websocket at \(path) was refused: check its token or session")
            return listener.write(refusal.response, to: conn, request: request, keepAlive: false)
        }
        guard Self.acceptKey(key).withCString({ eh_ws_accept(conn, $0) }) == 1 else { return }
        let connection = WebSocketConnection(conn)
        ConnectionTask.start(for: conn) { await pusher(connection) } then: { connection.close() }
    }

    /// `Sec-WebSocket-Accept` for `key`: base64(SHA-1(key + GUID)) (RFC 6455 §4.2.2).
    static func acceptKey(_ key: String) -> String {
        let input = Array((key + acceptGUID).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var size: UInt32 = 0
        _ = input.withUnsafeBufferPointer { EVP_Digest($0.baseAddress, $0.count, &digest, &size, EVP_sha1(), nil) }
        return Data(digest.prefix(Int(size))).base64EncodedString()
    }
}

/// One open websocket of a ``WebSocketEndpoint``, as its pusher sees it. `@unchecked Sendable`: the C connection is
/// reference-counted (this object holds a reference) and its functions are thread-safe (the connection's lock).
final class WebSocketConnection: @unchecked Sendable {
    private let connection: OpaquePointer

    init(_ connection: OpaquePointer) {
        self.connection = connection
        eh_conn_retain(connection)
    }

    deinit { eh_conn_release(connection) }

    /// Whether the client has gone: the pusher should return.
    var isClosed: Bool { eh_conn_is_closed(connection) != 0 }

    /// Queues one text message without waiting; false once the connection is closed, or when the client has left
    /// more than the listener's output buffer unread (then the connection is closed: a client that does not read
    /// cannot grow the server's memory).
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { eh_ws_send_text(connection, $0.baseAddress, $0.count) } == 1
    }

    /// Sends a close frame and closes the connection.
    func close() { eh_ws_close(connection) }
}
