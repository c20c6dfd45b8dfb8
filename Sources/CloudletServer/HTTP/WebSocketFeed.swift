import CloudletConcurrency
import CloudletWire
import CCivetweb
import Cloudlet
import Foundation
import Synchronization

/// The websocket at `/cloudlet/notifications/ws?token=…&after=…`: pushes each notification of the token's user as
/// a JSON text message (the shape of ``NotificationCoding/write(_:to:)``), plus `{"gap": true, …}` when the log
/// could not cover the requested position. A client that reconnects with `after` = the last notificationID it got
/// receives what it missed.
///
/// civetweb serves each websocket on one of its worker threads (reading frames); a pusher thread per connection
/// waits on the notification log and writes. Closing waits for the pusher to leave (at most one wait interval),
/// so nothing is ever written to a connection civetweb has released.
final class WebSocketFeed: Sendable {
    static let path = "/cloudlet/notifications/ws"
    /// How long a pusher waits for notifications before checking whether its connection closed.
    static let waitSeconds = 0.25

    let courier: NotificationCourier

    /// One open websocket. `@unchecked Sendable`: `connection` is only written to under civetweb's connection
    /// lock (`mg_lock_connection`), and `closed`/`done` are synchronization primitives.
    private final class Session: @unchecked Sendable {
        let connection: OpaquePointer
        let inbox: NotificationHub.Inbox
        var after: NotificationID?
        let closed = Atomic<Bool>(false)
        /// Whether a pusher thread was started (close waits for it only then).
        let started = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)

        init(connection: OpaquePointer, inbox: NotificationHub.Inbox, after: NotificationID?) {
            self.connection = connection
            self.inbox = inbox
            self.after = after
        }
    }

    private let sessions = Mutex<[UInt: Session]>([:])

    init(courier: NotificationCourier) { self.courier = courier }

    /// Registers the websocket handlers on a started civetweb context.
    func register(_ context: OpaquePointer) {
        let me = Unmanaged.passRetained(self).toOpaque()
        mg_set_websocket_handler(context, Self.path, wsConnect, wsReady, wsData, wsClose, me)
    }

    private static func key(_ c: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(c))) }

    fileprivate func connect(_ conn: OpaquePointer) -> Int32 {
        guard let info = mg_get_request_info(conn) else { return 1 }
        let query = info.pointee.query_string.map { String(cString: $0) } ?? ""
        let request = HTTPRequest(method: "GET", path: Self.path, query: query)
        guard let inbox = courier.inbox(token: request.queryParameter("token")) else { return 1 }
        var after: NotificationID?
        if let a = request.queryParameter("after"), !a.isEmpty {
            guard let id = NotificationID(a) else { return 1 }
            after = id
        }
        sessions.withLock { $0[Self.key(conn)] = Session(connection: conn, inbox: inbox, after: after) }
        return 0
    }

    fileprivate func ready(_ conn: OpaquePointer) {
        guard let session = sessions.withLock({ $0[Self.key(conn)] }) else { return }
        let store = courier.store
        session.started.store(true, ordering: .releasing)
        Thread.detachNewThread {
            defer { session.done.signal() }
            while !session.closed.load(ordering: .acquiring) {
                let after = session.after
                guard let batch = try? ThreadBridge.wait({
                    await store.notifications(
                        container: session.inbox.container, environment: session.inbox.environment,
                        user: session.inbox.user, after: after, wait: Self.waitSeconds)
                }) else { return }
                if batch.gap {
                    var w = JSONWriter()
                    w.object { w in
                        w.member("gap", true)
                        w.member("next", batch.next.description)
                    }
                    guard Self.send(w.bytes, session) else { return }
                }
                for n in batch.notifications {
                    guard Self.send(NotificationCoding.encode(n), session) else { return }
                }
                session.after = batch.next
            }
        }
    }

    private static func send(_ bytes: [UInt8], _ s: Session) -> Bool {
        if s.closed.load(ordering: .acquiring) { return false }
        mg_lock_connection(s.connection)
        defer { mg_unlock_connection(s.connection) }
        let n = bytes.withUnsafeBytes {
            mg_websocket_write(s.connection, Int32(MG_WEBSOCKET_OPCODE_TEXT), $0.baseAddress?.assumingMemoryBound(to: CChar.self), $0.count)
        }
        return n > 0
    }

    fileprivate func close(_ conn: OpaquePointer) {
        guard let session = sessions.withLock({ $0.removeValue(forKey: Self.key(conn)) }) else { return }
        session.closed.store(true, ordering: .releasing)
        // Wait for the pusher (it checks `closed` at least every waitSeconds) so it never writes after this.
        if session.started.load(ordering: .acquiring) { session.done.wait() }
    }
}

private let wsConnect: mg_websocket_connect_handler = { conn, cbdata in
    guard let conn, let cbdata else { return 1 }
    return Unmanaged<WebSocketFeed>.fromOpaque(cbdata).takeUnretainedValue().connect(conn)
}

private let wsReady: mg_websocket_ready_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<WebSocketFeed>.fromOpaque(cbdata).takeUnretainedValue().ready(conn)
}

private let wsData: mg_websocket_data_handler = { _, bits, _, _, _ in
    // Clients send nothing we need; a close frame ends the connection.
    (Int(bits) & 0x0F) == Int(MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) ? 0 : 1
}

private let wsClose: mg_websocket_close_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<WebSocketFeed>.fromOpaque(cbdata).takeUnretainedValue().close(conn)
}
