import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// `subscriptions/list`, `subscriptions/lookup` and `subscriptions/modify` (operationType create / update /
/// delete). A subscription on the wire: `{subscriptionID, subscriptionType: query|zone|database, query:
/// {recordType, filterBy}, zoneID, zoneWide, firesOn: [create, update, delete], firesOnce, notificationInfo:
/// {alertBody, desiredKeys}}`. Subscriptions belong to the signed-in user and this database.
struct SubscriptionsHandler {
    static let maxOperations = 200

    let context: RequestContext

    func list() throws -> [UInt8] {
        let db = context.database
        let subs = try ThreadBridge.wait { try await db.subscriptions() }
        return Self.response { w in for s in subs { Self.write(s, owner: db.id.owner, to: &w) } }
    }

    func lookup() throws -> [UInt8] {
        guard let items = try context.body.array("subscriptions", at: "") else {
            throw APIError.badRequest("subscriptions is missing")
        }
        try check(items.count)
        let ids = try items.enumerated().map { i, item -> String in
            let o = try item.requireObject(at: "subscriptions[\(i)]")
            guard let id = try o.string("subscriptionID", at: "subscriptions[\(i)]") else {
                throw APIError.badRequest("subscriptions[\(i)].subscriptionID is missing")
            }
            return id
        }
        let db = context.database
        let results = try ThreadBridge.wait { () async throws -> [Result<Subscription, CloudletError>] in
            var out: [Result<Subscription, CloudletError>] = []
            for id in ids {
                do { out.append(.success(try await db.subscription(id))) } catch let e as CloudletError { out.append(.failure(e)) }
            }
            return out
        }
        return Self.response { w in
            for (id, r) in zip(ids, results) {
                switch r {
                case .success(let s): Self.write(s, owner: context.database.id.owner, to: &w)
                case .failure(let e): Self.writeError(e, id: id, to: &w)
                }
            }
        }
    }

    private enum Operation: String { case create, update, delete }

    func modify() throws -> [UInt8] {
        guard let items = try context.body.array("operations", at: "") else {
            throw APIError.badRequest("operations is missing")
        }
        try check(items.count)
        let ops: [(Operation, Subscription?, String)] = try items.enumerated().map { i, item in
            let p = "operations[\(i)]"
            let o = try item.requireObject(at: p)
            guard let t = try o.string("operationType", at: p) else { throw APIError.badRequest("\(p).operationType is missing") }
            guard let op = Operation(rawValue: t) else {
                throw APIError.badRequest("\(p).operationType '\(t)' is not create, update or delete")
            }
            guard let s = try o.object("subscription", at: p) else { throw APIError.badRequest("\(p).subscription is missing") }
            guard let id = try s.string("subscriptionID", at: "\(p).subscription"), !id.isEmpty else {
                throw APIError.badRequest("\(p).subscription.subscriptionID is missing")
            }
            return (op, op == .delete ? nil : try Self.decode(s, at: "\(p).subscription"), id)
        }
        let db = context.database
        let results = try ThreadBridge.wait { () async throws -> [Result<Subscription?, CloudletError>] in
            var out: [Result<Subscription?, CloudletError>] = []
            for (op, sub, id) in ops {
                do {
                    switch op {
                    case .create:
                        if (try? await db.subscription(id)) != nil {
                            throw CloudletError(.recordExists, "subscription '\(id)' already exists; use update")
                        }
                        out.append(.success(try await db.saveSubscription(sub!)))
                    case .update:
                        _ = try await db.subscription(id)
                        out.append(.success(try await db.saveSubscription(sub!)))
                    case .delete:
                        try await db.deleteSubscription(id)
                        out.append(.success(nil))
                    }
                } catch let e as CloudletError {
                    out.append(.failure(e))
                }
            }
            return out
        }
        return Self.response { w in
            for ((_, _, id), r) in zip(ops, results) {
                switch r {
                case .success(let s?): Self.write(s, owner: context.database.id.owner, to: &w)
                case .success(nil):
                    w.object { w in
                        w.member("subscriptionID", id)
                        w.member("deleted", true)
                    }
                case .failure(let e): Self.writeError(e, id: id, to: &w)
                }
            }
        }
    }

    private func check(_ n: Int) throws {
        guard n <= Self.maxOperations else {
            throw APIError.badRequest("\(n) subscriptions in one request; the limit is \(Self.maxOperations)")
        }
    }

    static func decode(_ o: [String: JSONValue], at path: String) throws -> Subscription {
        let id = try o.string("subscriptionID", at: path)!
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

    static func write(_ s: Subscription, owner: String, to w: inout JSONWriter) {
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
                    ZoneIDCoding.write(ZoneID(zoneName: zone.zoneName, ownerName: owner), to: &w)
                } else {
                    w.member("zoneWide", true)
                }
            case .zone(let zone):
                w.member("subscriptionType", "zone")
                w.key("zoneID")
                ZoneIDCoding.write(ZoneID(zoneName: zone.zoneName, ownerName: owner), to: &w)
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

    static func writeError(_ e: CloudletError, id: String, to w: inout JSONWriter) {
        let api = APIError(e)
        w.object { w in
            w.member("subscriptionID", id)
            w.member("serverErrorCode", api.serverErrorCode)
            w.member("reason", api.reason)
            w.member("uuid", UUID().uuidString.lowercased())
        }
    }

    private static func response(_ items: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.key("subscriptions")
            w.array(items)
        }
        return w.bytes
    }
}
