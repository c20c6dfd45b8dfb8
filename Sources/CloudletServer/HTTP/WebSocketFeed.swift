import CloudletWire
import Cloudlet
import Foundation

/// The websocket at `/cloudlet/notifications/ws?token=…&after=…`: pushes each notification of the token's user as
/// a JSON text message (the shape of ``NotificationCoding/write(_:to:)``), plus `{"gap": true, …}` when the log
/// could not cover the requested position. A client that reconnects with `after` = the last notificationID it got
/// receives what it missed.
///
/// Each connection's pusher (a ``ConnectionTask``, see ``WebSocketEndpoint``) awaits the notification log with no
/// timeout and queues what it gets; it wakes only for a notification, or when its task is cancelled because the
/// connection closed (an idle client costs no wake-ups; ``Metrics/idleWakeup()`` counts any that find nothing).
final class WebSocketFeed: Sendable {
    static let path = "/cloudlet/notifications/ws"

    let courier: NotificationCourier
    let metrics: Metrics

    init(courier: NotificationCourier, metrics: Metrics) {
        self.courier = courier
        self.metrics = metrics
    }

    /// The websocket endpoint to give the listener.
    var endpoint: WebSocketEndpoint {
        let (courier, metrics) = (courier, metrics)
        return WebSocketEndpoint(path: Self.path) { request in
            guard let token = request.queryParameter("token"), let inbox = courier.inbox(token: token) else { return nil }
            var after: NotificationID?
            if let a = request.queryParameter("after"), !a.isEmpty {
                guard let id = NotificationID(a) else { return nil }
                after = id
            }
            let start = after
            return { connection in
                // The token stays live while the websocket is open (a client may reconnect with it days later).
                courier.tokens.hold(token, for: inbox)
                defer { courier.tokens.release(token) }
                await Self.push(inbox, after: start, store: courier.store, metrics: metrics, to: connection)
            }
        }
    }

    /// Sends the inbox's notifications after `after` until the connection closes (the task is cancelled).
    private static func push(
        _ inbox: NotificationHub.Inbox, after: NotificationID?, store: CloudletStore, metrics: Metrics,
        to connection: WebSocketConnection
    ) async {
        var after = after
        while !Task.isCancelled && !connection.isClosed {
            let batch = await store.notifications(
                container: inbox.container, environment: inbox.environment, user: inbox.user, after: after, wait: .infinity)
            if batch.notifications.isEmpty && !batch.gap {
                if !Task.isCancelled { metrics.idleWakeup() }
                continue
            }
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
