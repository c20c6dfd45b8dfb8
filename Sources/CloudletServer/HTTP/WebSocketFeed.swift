import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// The websocket at `/cloudlet/notifications/ws?token=…&after=…`: pushes each notification of the token's user as
/// a JSON text message (the shape of ``NotificationCoding/write(_:to:)``), plus `{"gap": true, …}` when the log
/// could not cover the requested position. A client that reconnects with `after` = the last notificationID it got
/// receives what it missed.
///
/// Each connection's pusher thread (``WebSocketEndpoint``) waits on the notification log and writes.
final class WebSocketFeed: Sendable {
    static let path = "/cloudlet/notifications/ws"
    /// How long a pusher waits for notifications before checking whether its connection closed.
    static let waitSeconds = 0.25

    let courier: NotificationCourier

    init(courier: NotificationCourier) { self.courier = courier }

    /// Registers the websocket handlers on a started civetweb context.
    func register(_ context: OpaquePointer) {
        let courier = courier
        WebSocketEndpoint(path: Self.path) { _, request in
            guard let inbox = courier.inbox(token: request.queryParameter("token")) else { return nil }
            var after: NotificationID?
            if let a = request.queryParameter("after"), !a.isEmpty {
                guard let id = NotificationID(a) else { return nil }
                after = id
            }
            let start = after
            return { connection in Self.push(inbox, after: start, store: courier.store, to: connection) }
        }.register(context)
    }

    /// Sends the inbox's notifications after `after` until the connection closes.
    private static func push(_ inbox: NotificationHub.Inbox, after: NotificationID?, store: CloudletStore, to connection: WebSocketConnection) {
        var after = after
        while !connection.isClosed {
            let from = after
            guard let batch = try? ThreadBridge.wait({
                await store.notifications(
                    container: inbox.container, environment: inbox.environment, user: inbox.user, after: from, wait: waitSeconds)
            }) else { return }
            if batch.gap {
                var w = JSONWriter()
                w.object { w in
                    w.member("gap", true)
                    w.member("next", batch.next.description)
                }
                guard connection.send(w.bytes) else { return }
            }
            for n in batch.notifications {
                guard connection.send(NotificationCoding.encode(n)) else { return }
            }
            after = batch.next
        }
    }
}
