import CCivetweb
import CloudletWire
import Cloudlet
import Foundation
import Synchronization

/// The console's live change view, a websocket at
/// `/cloudlet/console/ws/changes?container=&environment=&database=&user=&zone=[&feed=database]`: once open, every
/// record saved or deleted in the zone is pushed as a JSON text message — the record as `changes/zone` writes it
/// (deletions with `deleted: true`) — or, with `feed=database` (private and shared databases), every zone that
/// changed as `changes/database` writes it (`{zoneID}`, `{zoneID, deleted: true}`); `{"error": reason}` comes before
/// the server closes a feed that failed.
///
/// The handshake needs the console's session cookie (SameSite=Strict: a browser sends it only from the console's
/// own pages) and, when the browser sends an `Origin`, one whose host is the `Host` the request was sent to.
/// The feed is read with the same `changes/zone` handler as the API, for the admin (``ConsoleHandler/context``):
/// a pusher thread per connection drains the zone's feed when it opens (only later changes are shown) and then
/// asks for changes every ``pollSeconds``. Closing waits for the pusher to leave, so nothing is written to a
/// connection civetweb has released.
final class ConsoleChangeFeed: Sendable {
    static let path = ConsoleHandler.prefix + "/ws/changes"
    static let pollSeconds = 0.5

    let router: APIRouter

    /// One open websocket. `@unchecked Sendable`: `connection` is written to only under civetweb's connection lock
    /// (`mg_lock_connection`); `closed`, `started` and `done` are synchronization primitives; `request` is not mutated.
    private final class Session: @unchecked Sendable {
        let connection: OpaquePointer
        let request: HTTPRequest
        let closed = Atomic<Bool>(false)
        let started = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)

        init(connection: OpaquePointer, request: HTTPRequest) {
            self.connection = connection
            self.request = request
        }
    }

    private let sessions = Mutex<[UInt: Session]>([:])

    init(router: APIRouter) { self.router = router }

    func register(_ context: OpaquePointer) {
        let me = Unmanaged.passRetained(self).toOpaque()
        mg_set_websocket_handler(context, Self.path, consoleConnect, consoleReady, consoleData, consoleClose, me)
    }

    private static func key(_ c: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(c))) }

    /// Whether `request` may open the feed: a live console session, and a same-origin browser.
    func admits(_ request: HTTPRequest, origin: String?) -> Bool {
        guard router.authenticator.consoleSessions.session(request.cookieValue(ConsoleHandler.cookieName)) != nil else {
            return false
        }
        guard let origin else { return true }  // not a browser: the cookie alone decides
        guard let host = request.host, let url = URL(string: origin), let originHost = url.host else { return false }
        return originHost + (url.port.map { ":\($0)" } ?? "") == host
    }

    fileprivate func connect(_ conn: OpaquePointer) -> Int32 {
        guard let info = mg_get_request_info(conn) else { return 1 }
        var request = HTTPRequest(
            method: "POST", path: Self.path, query: info.pointee.query_string.map { String(cString: $0) } ?? "",
            host: mg_get_header(conn, "Host").map { String(cString: $0) }, isTLS: info.pointee.is_ssl != 0)
        request.cookie = mg_get_header(conn, "Cookie").map { String(cString: $0) }
        guard admits(request, origin: mg_get_header(conn, "Origin").map { String(cString: $0) }) else { return 1 }
        sessions.withLock { $0[Self.key(conn)] = Session(connection: conn, request: request) }
        return 0
    }

    fileprivate func ready(_ conn: OpaquePointer) {
        guard let session = sessions.withLock({ $0[Self.key(conn)] }) else { return }
        session.started.store(true, ordering: .releasing)
        let router = router
        Thread.detachNewThread {
            defer { session.done.signal() }
            do {
                try Self.push(session, router: router)
            } catch {
                let reason = (error as? APIError)?.reason ?? (error as? CloudletError)?.message ?? "\(error)"
                var w = JSONWriter()
                w.object { w in w.member("error", reason) }
                _ = Self.send(w.bytes, session)
            }
        }
    }

    /// Drains the feed, then sends each later change until the connection closes.
    private static func push(_ session: Session, router: APIRouter) throws {
        let r = session.request
        let wholeDatabase = r.queryParameter("feed") == "database"
        let op: Route = wholeDatabase ? .changesDatabase : .changesZone
        let parts = ["1", r.queryParameter("container") ?? "", r.queryParameter("environment") ?? "development",
            r.queryParameter("database") ?? "public", op.rawValue]
        let path = try DatabasePath(DatabasePath.prefix + parts.joined(separator: "/"))
        let zone = r.queryParameter("zone").flatMap { $0.isEmpty ? nil : $0 } ?? "_defaultZone"
        let console = ConsoleHandler(router: router)
        var token: String?
        var live = false
        while !session.closed.load(ordering: .acquiring) {
            // changes/database: {syncToken?} → {zones, syncToken, moreComing}; changes/zone: one zone's request →
            // {zones: [{syncToken, moreComing, records} | error]}.
            var body: [String: JSONValue] = [:]
            if wholeDatabase {
                if let token { body["syncToken"] = .string(token) }
            } else {
                var zoneRequest: [String: JSONValue] = ["zoneID": .object(["zoneName": .string(zone)])]
                if let token { zoneRequest["syncToken"] = .string(token) }
                body["zones"] = .array([.object(zoneRequest)])
            }
            let context = try console.context(path, op: op, user: r.queryParameter("user"), body: body, request: r)
            let reply = try JSONParser.parse(try router.perform(op, context: context, request: r))
            guard let result = wholeDatabase ? reply : reply["zones"]?.arrayValue?.first else { return }
            if let code = result["serverErrorCode"]?.stringValue {
                throw APIError(code, result["reason"]?.stringValue ?? code)
            }
            token = result["syncToken"]?.stringValue
            if live {
                for change in result[wholeDatabase ? "zones" : "records"]?.arrayValue ?? [] {
                    var w = JSONWriter()
                    w.value(change)
                    guard send(w.bytes, session) else { return }
                }
            }
            if result["moreComing"]?.boolValue == true { continue }
            live = true
            Thread.sleep(forTimeInterval: pollSeconds)
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
        if session.started.load(ordering: .acquiring) { session.done.wait() }
    }
}

private let consoleConnect: mg_websocket_connect_handler = { conn, cbdata in
    guard let conn, let cbdata else { return 1 }
    return Unmanaged<ConsoleChangeFeed>.fromOpaque(cbdata).takeUnretainedValue().connect(conn)
}

private let consoleReady: mg_websocket_ready_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<ConsoleChangeFeed>.fromOpaque(cbdata).takeUnretainedValue().ready(conn)
}

private let consoleData: mg_websocket_data_handler = { _, bits, _, _, _ in
    (Int(bits) & 0x0F) == Int(MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) ? 0 : 1
}

private let consoleClose: mg_websocket_close_handler = { conn, cbdata in
    guard let conn, let cbdata else { return }
    Unmanaged<ConsoleChangeFeed>.fromOpaque(cbdata).takeUnretainedValue().close(conn)
}
