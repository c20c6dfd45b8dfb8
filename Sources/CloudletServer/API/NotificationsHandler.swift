import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// Notification delivery, as CloudKit's web courier: `tokens/create` returns a `webcourierURL` that the client
/// long-polls (`GET /cloudlet/notifications/poll?token=…&after=…&timeout=…`); the same token opens a websocket at
/// `/cloudlet/notifications/ws?token=…&after=…` that pushes each notification as a JSON text message.
///
/// Both take `after`, the ID of the last notification the client has; a client that reconnects passes it and gets
/// what it missed from the user's notification log, which is durable (docs/notifications.md): also after a restart. A
/// response with `gap: true` says the log no longer holds everything after that position (the client is further
/// behind than the log's retention): fetch changes with sync tokens. Courier tokens (``CourierTokens``) expire a
/// while after their last use and live at most as long as the server process; clients create a new one when theirs
/// is refused (after a restart too) and keep their `after`.
final class NotificationCourier: Sendable {
    /// Courier token → whose notifications it reads.
    let tokens: CourierTokens
    let store: CloudletStore
    static let maxPollSeconds = 60.0

    /// Where `webcourierURL` and `websocketURL` point.
    let origin: ServerOrigin

    init(store: CloudletStore, origin: ServerOrigin, tokens: CourierTokens) {
        self.store = store
        self.origin = origin
        self.tokens = tokens
    }

    /// `tokens/create`: `{apnsEnvironment?}` → `{apnsEnvironment, apnsToken, webcourierURL, websocketURL}`.
    func createToken(_ context: RequestContext) throws -> [UInt8] {
        let env = try apnsEnvironment(context)
        let token = try createToken(inbox(context))
        return describe(token, env: env)
    }

    /// `tokens/register` (`{apnsToken, apnsEnvironment?}`): Cloudlet cannot push through APNs, so the token is
    /// registered as a web courier token of the caller's notifications (a token `tokens/create` gave them, or one of
    /// their own making: 16–256 printable ASCII characters) → the same answer as `tokens/create`. A token that is
    /// another user's is `ACCESS_DENIED`.
    func registerToken(_ context: RequestContext) throws -> [UInt8] {
        let env = try apnsEnvironment(context)
        guard let token = try context.body.string("apnsToken", at: "") else { throw APIError.badRequest("apnsToken is missing") }
        guard (16...256).contains(token.utf8.count), token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "&") }) else {
            throw APIError.badRequest("apnsToken must be 16–256 printable ASCII characters without '&'")
        }
        guard tokens.insert(token, for: inbox(context)) else {
            throw APIError("ACCESS_DENIED", "apnsToken is registered to another user or container")
        }
        return describe(token, env: env)
    }

    private func apnsEnvironment(_ context: RequestContext) throws -> String {
        let env = try context.body.string("apnsEnvironment", at: "") ?? "development"
        guard env == "development" || env == "production" else {
            throw APIError.badRequest("apnsEnvironment must be development or production, not '\(env)'")
        }
        return env
    }

    private func inbox(_ context: RequestContext) -> NotificationHub.Inbox {
        NotificationHub.Inbox(container: context.path.container, environment: context.path.environment, user: context.database.user)
    }

    private func describe(_ token: String, env: String) -> [UInt8] {
        let origin = origin.url
        var w = JSONWriter()
        w.object { w in
            w.member("apnsEnvironment", env)
            w.member("apnsToken", token)
            w.member("webcourierURL", "\(origin)/cloudlet/notifications/poll?token=\(token)")
            w.member("websocketURL", origin.webSocket("/cloudlet/notifications/ws?token=\(token)"))
        }
        return w.bytes
    }

    /// A new courier token for `inbox`.
    func createToken(_ inbox: NotificationHub.Inbox) throws -> String {
        let token = try Secrets.newToken()
        _ = tokens.insert(token, for: inbox)  // 256 random bits: no other inbox has it
        return token
    }

    /// The inbox a live courier token reads (a use of the token); nil for a missing, unknown or expired one.
    func inbox(token: String?) -> NotificationHub.Inbox? {
        guard let token else { return nil }
        return tokens.use(token)
    }

    /// `GET /cloudlet/notifications/poll?token=&after=&timeout=` → `{notifications: […], next, gap}`; waits up to
    /// `timeout` seconds (default 30, from 0 to 60; anything else is `BAD_REQUEST`) when there is nothing new.
    func poll(_ request: HTTPRequest) -> HTTPResponse {
        guard let inbox = inbox(token: request.queryParameter("token")) else {
            return APIError("AUTHENTICATION_FAILED", "unknown or expired courier token: call tokens/create").response
        }
        var after: NotificationID?
        if let a = request.queryParameter("after"), !a.isEmpty {
            guard let id = NotificationID(a) else { return APIError.badRequest("after '\(a)' is not a notification ID").response }
            after = id
        }
        let timeout: Double
        do {
            timeout = try request.decimalParameter("timeout", in: 0...Self.maxPollSeconds, unit: "seconds") ?? 30
        } catch let e as APIError {
            return e.response
        } catch {
            return APIError.badRequest("\(error)").response
        }
        let store = self.store
        let position = after
        // Answered later: the wait holds the connection, not a worker thread.
        return .later {
            let batch = await store.notifications(
                container: inbox.container, environment: inbox.environment, user: inbox.user, after: position,
                wait: timeout)
            return HTTPResponse(status: 200, body: NotificationCoding.encode(batch))
        }
    }
}
