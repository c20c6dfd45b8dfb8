import CCivetweb
import Foundation
import Synchronization

/// A websocket path on the listener whose connections only receive: on the handshake ``accept`` decides whether to
/// take the connection and what to run for it; once the connection is ready, that runs on a pusher thread of its
/// own, sending text messages until it returns or the connection closes.
///
/// civetweb serves each websocket on one of its worker threads (reading frames); the pusher writes. Closing waits
/// for the pusher to leave (a pusher checks ``WebSocketConnection/isClosed`` at least once per wait of its own), so
/// nothing is ever written to a connection civetweb has released. Used by the notification feed
/// (``WebSocketFeed``) and the console's change feed (``ConsoleChangeFeed``).
final class WebSocketEndpoint: Sendable {
    /// What runs for an accepted connection, on its pusher thread.
    typealias Pusher = @Sendable (WebSocketConnection) -> Void

    let path: String
    /// Called on the handshake with the request as civetweb read it: the pusher, or nil to refuse the connection.
    let accept: @Sendable (OpaquePointer, HTTPRequest) -> Pusher?

    private let connections = Mutex<[UInt: (WebSocketConnection, Pusher)]>([:])

    init(path: String, accept: @escaping @Sendable (OpaquePointer, HTTPRequest) -> Pusher?) {
        self.path = path
        self.accept = accept
    }

    /// Registers the handlers on a started civetweb context (the endpoint stays alive as long as the context).
    func register(_ context: OpaquePointer) {
        let me = Unmanaged.passRetained(self).toOpaque()
        mg_set_websocket_handler(context, path, endpointConnect, endpointReady, endpointData, endpointClose, me)
    }

    private static func key(_ c: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(c))) }

    fileprivate func connect(_ conn: OpaquePointer) -> Int32 {
        guard let info = mg_get_request_info(conn) else { return 1 }
        var request = HTTPRequest(
            method: "GET", path: path, query: info.pointee.query_string.map { String(cString: $0) } ?? "",
            host: mg_get_header(conn, "Host").map { String(cString: $0) }, isTLS: info.pointee.is_ssl != 0)
        request.cookie = mg_get_header(conn, "Cookie").map { String(cString: $0) }
        request.origin = mg_get_header(conn, "Origin").map { String(cString: $0) }
        guard let pusher = accept(conn, request) else { return 1 }
        connections.withLock { $0[Self.key(conn)] = (WebSocketConnection(conn), pusher) }
        return 0
    }

    fileprivate func ready(_ conn: OpaquePointer) {
        guard let (connection, pusher) = connections.withLock({ $0[Self.key(conn)] }) else { return }
        connection.started.store(true, ordering: .releasing)
        Thread.detachNewThread {
            defer { connection.done.signal() }
            pusher(connection)
        }
    }

    fileprivate func close(_ conn: OpaquePointer) {
        guard let (connection, _) = connections.withLock({ $0.removeValue(forKey: Self.key(conn)) }) else { return }
        connection.closed.store(true, ordering: .releasing)
        if connection.started.load(ordering: .acquiring) { connection.done.wait() }
    }
}

/// One open websocket of a ``WebSocketEndpoint``, as its pusher sees it. `@unchecked Sendable`: `connection` is
/// written to only under civetweb's connection lock (`mg_lock_connection`); `closed`, `started` and `done` are
/// synchronization primitives.
final class WebSocketConnection: @unchecked Sendable {
    private let connection: OpaquePointer
    fileprivate let closed = Atomic<Bool>(false)
    /// Whether a pusher thread was started (close waits for it only then).
    fileprivate let started = Atomic<Bool>(false)
    fileprivate let done = DispatchSemaphore(value: 0)

    fileprivate init(_ connection: OpaquePointer) { self.connection = connection }

    /// Whether the client has gone: the pusher should return.
    var isClosed: Bool { closed.load(ordering: .acquiring) }

    /// Sends one text message; false once the connection is closed or the write failed.
    func send(_ bytes: [UInt8]) -> Bool {
        if isClosed { return false }
        mg_lock_connection(connection)
        defer { mg_unlock_connection(connection) }
        let n = bytes.withUnsafeBytes {
            mg_websocket_write(connection, Int32(MG_WEBSOCKET_OPCODE_TEXT), $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count)
        }
        return n > 0
    }
}

private let endpointConnect: mg_websocket_connect_handler = { conn, cbdata in
    guard let conn, let cbdata else { return 1 }
    return Unmanaged<WebSocketEndpoint>.fromOpaque(cbdata).takeUnretainedValue().connect(conn)
}

private let endpointReady: mg_websocket_ready_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<WebSocketEndpoint>.fromOpaque(cbdata).takeUnretainedValue().ready(conn)
}

private let endpointData: mg_websocket_data_handler = { _, bits, _, _, _ in
    // Clients send nothing these endpoints need; a close frame ends the connection.
    (Int(bits) & 0x0F) == Int(MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) ? 0 : 1
}

private let endpointClose: mg_websocket_close_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<WebSocketEndpoint>.fromOpaque(cbdata).takeUnretainedValue().close(conn)
}
