import CloudletCore
import CloudletModel

/// Subscriptions on the wire: `{subscriptionID, subscriptionType: query|zone|database, query: {recordType,
/// filterBy}, zoneID?, zoneWide?, firesOn: [create, update, delete], firesOnce, notificationInfo: {alertBody,
/// desiredKeys}}`, and the per-subscription error dictionaries.
public enum SubscriptionCoding {
    public static func decode(_ o: [String: JSONValue], at path: String) throws -> Subscription {
        guard let id = try o.string("subscriptionID", at: path), !id.isEmpty else {
            throw APIError.badRequest("\(path).subscriptionID is missing")
        }
        let type = try o.string("subscriptionType", at: path) ?? (o["query"] != nil ? "query" : "zone")
        let zone = try ZoneIDCoding.decode(o["zoneID"], at: "\(path).zoneID")
        let kind: Subscription.Kind
        switch type {
        case "query":
            guard let q = try o.object("query", at: path) else { throw APIError.badRequest("\(path).query is missing") }
            guard let recordType = try q.string("recordType", at: "\(path).query") else {
                throw APIError.badRequest("\(path).query.recordType is missing")
            }
            let zoneWide = try o.bool("zoneWide", at: path) ?? false
            let predicate = try FilterCoding.decode(q["filterBy"], at: "\(path).query.filterBy", zone: zone ?? .default)
            kind = .query(recordType: recordType, predicate: predicate, zoneID: zoneWide ? nil : zone)
        case "zone":
            guard let zone else { throw APIError.badRequest("\(path).zoneID is required for a zone subscription") }
            kind = .zone(zone)
        case "database":
            kind = .database
        default:
            throw APIError.badRequest("\(path).subscriptionType '\(type)' is not query, zone or database")
        }
        var firesOn: Subscription.FiresOn = []
        for (i, f) in (try o.strings("firesOn", at: path) ?? ["create", "update", "delete"]).enumerated() {
            switch f {
            case "create": firesOn.insert(.create)
            case "update": firesOn.insert(.update)
            case "delete": firesOn.insert(.delete)
            default: throw APIError.badRequest("\(path).firesOn[\(i)] '\(f)' is not create, update or delete")
            }
        }
        let info = try o.object("notificationInfo", at: path)
        let desiredKeys = try info?.strings("desiredKeys", at: "\(path).notificationInfo") ?? o.strings("desiredKeys", at: path)
        return Subscription(
            id: id, kind: kind, firesOn: firesOn, firesOnce: try o.bool("firesOnce", at: path) ?? false,
            desiredKeys: desiredKeys, alertBody: try info?.string("alertBody", at: "\(path).notificationInfo"))
    }

    public static func write(_ s: Subscription, owner: String, to w: inout JSONWriter) {
        w.object { w in
            w.member("subscriptionID", s.id)
            switch s.kind {
            case .query(let type, let predicate, let zone):
                w.member("subscriptionType", "query")
                w.key("query")
                w.object { w in
                    w.member("recordType", type)
                    w.key("filterBy")
                    FilterCoding.write(predicate, zone: zone ?? .default, to: &w)
                }
                if let zone {
                    w.key("zoneID")
                    ZoneIDCoding.write(zone, owner: owner, to: &w)
                } else {
                    w.member("zoneWide", true)
                }
            case .zone(let zone):
                w.member("subscriptionType", "zone")
                w.key("zoneID")
                ZoneIDCoding.write(zone, owner: owner, to: &w)
            case .database:
                w.member("subscriptionType", "database")
            }
            w.key("firesOn")
            w.array { w in
                if s.firesOn.contains(.create) { w.value(.string("create")) }
                if s.firesOn.contains(.update) { w.value(.string("update")) }
                if s.firesOn.contains(.delete) { w.value(.string("delete")) }
            }
            w.member("firesOnce", s.firesOnce)
            w.key("notificationInfo")
            w.object { w in
                if let a = s.alertBody { w.member("alertBody", a) }
                if let keys = s.desiredKeys {
                    w.key("desiredKeys")
                    w.array { w in for k in keys { w.value(.string(k)) } }
                }
            }
        }
    }

    public static func writeError(_ e: CloudletError, id: String, to w: inout JSONWriter) {
        w.object { w in
            w.member("subscriptionID", id)
            APIError(e).writeMembers(to: &w)
        }
    }
}
