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
        return Self.response { w in for s in subs { SubscriptionCoding.write(s, owner: db.id.owner, to: &w) } }
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
        let results = try ThreadBridge.wait { try await perItemResults(ids) { try await db.subscription($0) } }
        return Self.response { w in
            for (id, r) in zip(ids, results) {
                switch r {
                case .success(let s): SubscriptionCoding.write(s, owner: context.database.id.owner, to: &w)
                case .failure(let e): SubscriptionCoding.writeError(e, id: id, to: &w)
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
            return (op, op == .delete ? nil : try SubscriptionCoding.decode(s, at: "\(p).subscription"), id)
        }
        let db = context.database
        // One batch: the per-user subscription cap holds for the request as a whole (over it, nothing is saved).
        let operations: [Database.SubscriptionOperation] = ops.map { op, sub, id in
            switch op {
            case .create: .create(sub!)
            case .update: .update(sub!)
            case .delete: .delete(id)
            }
        }
        let results = try ThreadBridge.wait { try await db.modifySubscriptions(operations) }
        return Self.response { w in
            for ((_, _, id), r) in zip(ops, results) {
                switch r {
                case .success(let s?): SubscriptionCoding.write(s, owner: context.database.id.owner, to: &w)
                case .success(nil):
                    w.object { w in
                        w.member("subscriptionID", id)
                        w.member("deleted", true)
                    }
                case .failure(let e): SubscriptionCoding.writeError(e, id: id, to: &w)
                }
            }
        }
    }

    private func check(_ n: Int) throws {
        guard n <= Self.maxOperations else {
            throw APIError.badRequest("\(n) subscriptions in one request; the limit is \(Self.maxOperations)")
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
