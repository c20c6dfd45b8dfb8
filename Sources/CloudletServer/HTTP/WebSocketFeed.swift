import CloudletWire
import Cloudlet
import Foundation

/// The websocket at `/cloudlet/notifications/ws?token=…&after=…`: pushes each notification of the token's user as
/// a JSON text message (the shape of ``NotificationCoding/write(_:to:)``), plus `{"gap": true, …}` when the log
/// could not cover the requested position. A client that reconnects with `after` = the last notificationID it got
/// receives what it missed.
///
/// Each connection's pusher (a task, ``WebSocketEndpoint``) awaits the notification log and queues what it gets.
final class WebSocketFeed: Sendable {
    static let path = "/cloudlet/notifications/ws"
    /// How long a pusher waits for notifications before checking whether its connection closed.
    static let waitSeconds = 0.25

    let courier: NotificationCourier

    init(courier: NotificationCourier) { self.courier = courier }

    /// The websocket endpoint to give the listener.
    var endpoint: WebSocketEndpoint {
        let courier = courier
        return WebSocketEndpoint(path: Self.path) { request in
            guard let inbox = courier.inbox(token: request.queryParameter("token")) else { return nil }
            var after: NotificationID?
            if let a = request.queryParameter("after"), !a.isEmpty {
                guard let id = NotificationID(a) else { return nil }
                after = id
            }
            let start = after
            return { connection in await Self.push(inbox, after: start, store: courier.store, to: connection) }
        }
    }

    /// Sends the inbox's notifications after `after` until the connection closes.
    private static func push(
        _ inbox: NotificationHub.Inbox, after: NotificationID?, store: CloudletStore, to connection: WebSocketConnection
    ) async {
        var after = after
        while !connection.isClosed {
            let batch = await store.notifications(
                container: inbox.container, environment: inbox.environment, user: inbox.user, after: after, wait: waitSeconds)
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
