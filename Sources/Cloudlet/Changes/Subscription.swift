import CloudletCore

/// The log encoding of subscriptions (the value type is in CloudletModel).
extension Subscription {
    package static func encode(_ s: Subscription, into w: inout ByteWriter) {
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

/// Who owns a subscription: a database and the user who subscribed (for the public database, each user has
/// their own subscriptions).
public struct SubscriberID: Hashable, Sendable {
    public var database: DatabaseID
    public var user: String

    public init(database: DatabaseID, user: String) {
        self.database = database
        self.user = user
    }

    package func encode(into w: inout ByteWriter) {
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
