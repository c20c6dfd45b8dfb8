import CloudletCore
import CloudletModel

/// Notifications on the wire, as the web courier's long-poll (`{notifications, next, gap}`) and the websocket
/// feed (one notification per message) deliver them.
public enum NotificationCoding {
    public static func encode(_ batch: NotificationBatch) -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.key("notifications")
            w.array { w in for n in batch.notifications { write(n, to: &w) } }
            w.member("next", batch.next.description)
            w.member("gap", batch.gap)
        }
        return w.bytes
    }

    public static func encode(_ n: RecordNotification) -> [UInt8] {
        var w = JSONWriter()
        write(n, to: &w)
        return w.bytes
    }

    /// `{notificationID, subscriptionID, notificationType: "query", queryNotificationReason, recordName,
    /// recordType, zoneID, databaseScope, fields, alertBody}`.
    public static func write(_ n: RecordNotification, to w: inout JSONWriter) {
        w.object { w in
            w.member("notificationID", n.id.description)
            w.member("subscriptionID", n.subscriptionID)
            w.member("notificationType", "query")
            w.member("queryNotificationReason", n.reason.rawValue)
            w.member("recordName", n.recordID.recordName)
            w.member("recordType", n.recordType)
            w.key("zoneID")
            ZoneIDCoding.write(n.recordID.zoneID, to: &w)
            w.member("databaseScope", n.database.scope.rawValue)
            w.key("fields")
            w.object { w in
                for name in n.fields.keys.sorted() {
                    w.key(name)
                    FieldCoding.write(n.fields[name]!, to: &w, numbersAsStrings: false, zone: n.recordID.zoneID)
                }
            }
            if let a = n.alertBody { w.member("alertBody", a) }
        }
    }
}
