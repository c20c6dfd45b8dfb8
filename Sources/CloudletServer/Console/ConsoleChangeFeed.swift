import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// The console's live change view, a websocket at
/// `/cloudlet/console/ws/changes?container=&environment=&database=&user=&zone=[&feed=database][&history=1]`: once
/// open, every record saved or deleted in the zone is pushed as a JSON text message — the record as `changes/zone` writes it
/// (deletions with `deleted: true`) — or, with `feed=database` (private and shared databases), every zone that
/// changed as `changes/database` writes it (`{zoneID}`, `{zoneID, deleted: true}`). `{"live": true}` comes once the
/// feed has caught up with the zone — what came before is sent only with `history=1` (each record's latest change,
/// as the feed keeps them) — and every change committed after it is pushed; `{"error": reason}` comes before the server closes a feed that failed.
///
/// The handshake needs the console's session cookie (SameSite=Strict: a browser sends it only from the console's
/// own pages) and, when the browser sends an `Origin`, one whose host is the `Host` the request was sent to.
/// The feed is read with the same `changes/zone` handler as the API, for the admin (``ConsoleHandler/context``):
/// a pusher task per connection listens to the store's commits (``CommitSignal``), drains the zone's feed when it
/// opens, and reads it again (on a thread that may block, ``ThreadBridge/offload(_:)``) as soon as a durable commit
/// touches the zone (or, for the database feed, the container's environment): no polling, no timeout, and no thread
/// held while it waits. ``WebSocketEndpoint`` runs the pusher (on ``DedicatedExecutor/push``), cancels it when the
/// connection closes, and closes the websocket when it returns.
final class ConsoleChangeFeed: Sendable {
    static let path = ConsoleHandler.prefix + "/ws/changes"
    let router: APIRouter

    init(router: APIRouter) { self.router = router }

    /// The websocket endpoint to give the listener.
    var endpoint: WebSocketEndpoint {
        let router = router
        return WebSocketEndpoint(path: Self.path) { [self] request in
            guard admits(request) else { return nil }
            return { connection in
                do {
                    try await Self.push(request, router: router, to: connection)
                } catch {
                    let reason = APIError(answering: error).reason
                    var w = JSONWriter()
                    w.object { w in w.member("error", reason) }
                    _ = connection.send(w.bytes)
                }
            }
        }
    }

    /// Whether handshake `request` may open the feed: a live console session, and a same-origin browser.
    func admits(_ request: HTTPRequest) -> Bool {
        guard router.authenticator.consoleSessions.session(request.cookieValue(ConsoleHandler.cookieName)) != nil else {
            return false
        }
        guard let origin = request.origin else { return true }  // not a browser: the cookie alone decides
        guard let host = request.host, let url = URL(string: origin), let originHost = url.host else { return false }
        return originHost + (url.port.map { ":\($0)" } ?? "") == host
    }

    /// Drains the feed, then sends each later change until the connection closes.
    private static func push(_ r: HTTPRequest, router: APIRouter, to connection: WebSocketConnection) async throws {
        let wholeDatabase = r.queryParameter("feed") == "database"
        let history = r.queryParameter("history") == "1"
        let op: Route = wholeDatabase ? .changesDatabase : .changesZone
        let parts = ["1", r.queryParameter("container") ?? "", r.queryParameter("environment") ?? "development",
            r.queryParameter("database") ?? "public", op.rawValue]
        let path = try DatabasePath(DatabasePath.prefix + parts.joined(separator: "/"))
        let zone = r.queryParameter("zone").flatMap { $0.isEmpty ? nil : $0 } ?? "_defaultZone"
        let console = ConsoleHandler(router: router)
        // Listening before the first read: a commit between that read and the wait still wakes the pusher.
        let signal = CommitSignal(store: router.store, container: path.container, environment: path.environment, zone: wholeDatabase ? nil : zone)
        defer { signal.cancel() }
        var token: String?
        var live = false
        while !Task.isCancelled && !connection.isClosed {
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
            let request = body
            let reply = try await ThreadBridge.offload {
                let context = try console.context(path, op: op, user: r.queryParameter("user"), body: request, request: r)
                return try JSONParser.parse(try router.perform(op, context: context, request: r))
            }
            guard let result = wholeDatabase ? reply : reply["zones"]?.arrayValue?.first else { return }
            if let code = result["serverErrorCode"]?.stringValue {
                throw APIError(code, result["reason"]?.stringValue ?? code)
            }
            token = result["syncToken"]?.stringValue
            if live || history {
                for change in result[wholeDatabase ? "zones" : "records"]?.arrayValue ?? [] {
                    var w = JSONWriter()
                    w.value(change)
                    guard connection.send(w.bytes) else { return }
                }
            }
            if result["moreComing"]?.boolValue == true { continue }
            if !live {
                live = true
                guard connection.send(Array(#"{"live":true}"#.utf8)) else { return }
            }
            // Until a commit touches the zone, or the connection closes (which cancels this task).
            guard await signal.wait() else { return }
        }
    }
}
