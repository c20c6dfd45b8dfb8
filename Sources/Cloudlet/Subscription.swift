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

    static func encode(_ s: Subscription, into w: inout ByteWriter) {
        w.string(s.id)
        switch s.kind {
        case .query(let type, let predicate, let zone):
            w.u8(1)
            w.string(type)
            PredicateCodec.encode(predicate, into: &w)
            w.string(zone?.zoneName ?? "")
        case .zone(let zone):
            w.u8(2)
            w.string(zone.zoneName)
        case .database:
            w.u8(3)
        }
        w.u8(s.firesOn.rawValue)
        w.bool(s.firesOnce)
        w.bool(s.desiredKeys != nil)
        if let keys = s.desiredKeys {
            w.varint(keys.count)
            for k in keys { w.string(k) }
        }
        w.string(s.alertBody ?? "")
    }

    static func decode(_ r: inout ByteReader) throws -> Subscription {
        let id = try r.string()
        let kind: Kind
        switch try r.u8() {
        case 1:
            let type = try r.string()
            let predicate = try PredicateCodec.decode(&r)
            let zone = try r.string()
            kind = .query(recordType: type, predicate: predicate, zoneID: zone.isEmpty ? nil : ZoneID(zoneName: zone))
        case 2: kind = .zone(ZoneID(zoneName: try r.string()))
        case 3: kind = .database
        case let k: throw CloudletError.corruption("subscription '\(id)': unknown kind \(k)")
        }
        var s = Subscription(id: id, kind: kind, firesOn: FiresOn(rawValue: try r.u8()), firesOnce: try r.bool())
        if try r.bool() {
            let n = try r.length()
            var keys: [String] = []
            for _ in 0..<n { keys.append(try r.string()) }
            s.desiredKeys = keys
        }
        let alert = try r.string()
        s.alertBody = alert.isEmpty ? nil : alert
        return s
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

/// Who owns a subscription: a database and the user who subscribed (for the public database, each user has
/// their own subscriptions).
public struct SubscriberID: Hashable, Sendable {
    public var database: DatabaseID
    public var user: String

    public init(database: DatabaseID, user: String) {
        self.database = database
        self.user = user
    }

    func encode(into w: inout ByteWriter) {
        w.string(database.container)
        w.u8(database.environment == .production ? 1 : 0)
        w.u8(Commit.scopeTag(database.scope))
        w.string(database.owner)
        w.string(user)
    }

    static func decode(_ r: inout ByteReader) throws -> SubscriberID {
        let container = try r.string()
        let env: CloudletCore.Environment = try r.u8() == 1 ? .production : .development
        let tag = try r.u8()
        guard let scope = Commit.scope(tag) else { throw CloudletError.corruption("\(r.what): bad scope \(tag)") }
        let owner = try r.string()
        return SubscriberID(
            database: DatabaseID(container: container, environment: env, scope: scope, owner: owner), user: try r.string())
    }
}
