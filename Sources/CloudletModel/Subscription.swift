import CloudletCore

/// A standing request to be notified of changes (CloudKit `CKSubscription`): to records matching a query, to a
/// zone, or to a whole database. Subscriptions belong to one database (one user's private or shared database, or
/// the public one per user) and are stored in the log like records.
public struct Subscription: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Records of `recordType` matching `predicate` (in `zoneID`, or any zone when nil).
        case query(recordType: String, predicate: Predicate, zoneID: ZoneID?)
        /// Any record change in a zone.
        case zone(ZoneID)
        /// Any record change in the database.
        case database
    }

    /// Which changes fire a query subscription (CloudKit `firesOn`).
    public struct FiresOn: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let create = FiresOn(rawValue: 1)
        public static let update = FiresOn(rawValue: 2)
        public static let delete = FiresOn(rawValue: 4)
        public static let all: FiresOn = [.create, .update, .delete]
    }

    /// Client-chosen ID, unique in its database.
    public var id: String
    public var kind: Kind
    public var firesOn: FiresOn
    /// Fire once, then delete the subscription (query subscriptions).
    public var firesOnce: Bool
    /// Fields to copy into each notification (nil: none).
    public var desiredKeys: [String]?
    /// Free text carried in notifications (CloudKit's notificationInfo alertBody).
    public var alertBody: String?

    public init(
        id: String, kind: Kind, firesOn: FiresOn = .all, firesOnce: Bool = false, desiredKeys: [String]? = nil,
        alertBody: String? = nil
    ) {
        self.id = id
        self.kind = kind
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.desiredKeys = desiredKeys
        self.alertBody = alertBody
    }
}

/// Why a notification was sent (CloudKit `queryNotificationReason`).
public enum NotificationReason: String, Sendable, Hashable {
    case recordCreated, recordUpdated, recordDeleted
}

/// A notification produced by a commit that matched a subscription.
public struct RecordNotification: Sendable, Hashable {
    /// Position in the user's notification log.
    public var id: NotificationID
    /// The commit that produced it.
    public var partition: Int
    public var lsn: UInt64
    public var subscriptionID: String
    public var database: DatabaseID
    public var reason: NotificationReason
    public var recordID: RecordID
    public var recordType: String
    /// The subscription's `desiredKeys` of the record (empty for deletions).
    public var fields: [String: FieldValue]
    public var alertBody: String?

    public init(
        id: NotificationID, partition: Int, lsn: UInt64, subscriptionID: String, database: DatabaseID,
        reason: NotificationReason, recordID: RecordID, recordType: String, fields: [String: FieldValue],
        alertBody: String?
    ) {
        self.id = id
        self.partition = partition
        self.lsn = lsn
        self.subscriptionID = subscriptionID
        self.database = database
        self.reason = reason
        self.recordID = recordID
        self.recordType = recordType
        self.fields = fields
        self.alertBody = alertBody
    }
}

/// A notification's position in its user's notification log: the log's incarnation (a new one each time the store
/// is opened) and a sequence number. Pass the last one seen to fetch what came after.
public struct NotificationID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var incarnation: UInt64
    public var sequence: UInt64

    public init(incarnation: UInt64, sequence: UInt64) {
        self.incarnation = incarnation
        self.sequence = sequence
    }

    /// Parses `<incarnation>-<sequence>` (hexadecimal incarnation).
    public init?(_ s: String) {
        let parts = s.split(separator: "-")
        guard parts.count == 2, let i = UInt64(parts[0], radix: 16), let q = UInt64(parts[1]) else { return nil }
        self.init(incarnation: i, sequence: q)
    }

    public var description: String { String(incarnation, radix: 16) + "-" + String(sequence) }

    public static func < (a: NotificationID, b: NotificationID) -> Bool {
        (a.incarnation, a.sequence) < (b.incarnation, b.sequence)
    }
}

/// A read of a user's notification log (the web courier's long-poll, the websocket feed).
public struct NotificationBatch: Sendable {
    public var notifications: [RecordNotification]
    /// The position to pass next time (the last notification's ID, or the log's current end).
    public var next: NotificationID
    /// Notifications after the requested position were dropped (too old, or from before a restart): resynchronize
    /// with change tokens.
    public var gap: Bool

    public init(notifications: [RecordNotification], next: NotificationID, gap: Bool) {
        self.notifications = notifications
        self.next = next
        self.gap = gap
    }
}
