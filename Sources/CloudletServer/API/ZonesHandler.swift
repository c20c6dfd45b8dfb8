import CloudletConcurrency
import CloudletWire
import Cloudlet

/// `zones/list`, `zones/lookup` and `zones/modify` (operationType `create` / `delete`; custom zones exist only in
/// private databases). Zone operations are independent of each other: each reports its own result, in order.
struct ZonesHandler {
    static let maxZones = 200

    let context: RequestContext

    func list() throws -> [UInt8] {
        let db = context.database
        let zones = try ThreadBridge.wait { try await db.zones() }
        return Self.response { w in for z in zones { Self.write(z, to: &w) } }
    }

    func lookup() throws -> [UInt8] {
        guard let items = try context.body.array("zones", at: "") else { throw APIError.badRequest("zones is missing") }
        try checkCount(items.count)
        let ids = try items.enumerated().map { i, item in try ZoneIDCoding.require(item, at: "zones[\(i)]") }
        let db = context.database
        let results = try ThreadBridge.wait { try await perItemResults(ids) { try await db.zone(for: $0) } }
        return Self.response { w in
            for (id, r) in zip(ids, results) {
                switch r {
                case .success(let z): Self.write(z, to: &w)
                case .failure(let e): ChangesCoding.writeError(e, zone: id, owner: context.database.id.owner, to: &w)
                }
            }
        }
    }

    private enum Operation: String, CaseIterable { case create, delete }

    func modify() throws -> [UInt8] {
        guard let items = try context.body.array("operations", at: "") else {
            throw APIError.badRequest("operations is missing")
        }
        try checkCount(items.count)
        let ops: [(Operation, ZoneID)] = try items.enumerated().map { i, item in
            let path = "operations[\(i)]"
            let o = try item.requireObject(at: path)
            guard let type = try o.string("operationType", at: path) else {
                throw APIError.badRequest("\(path).operationType is missing")
            }
            guard let op = Operation(rawValue: type) else {
                throw APIError.badRequest("\(path).operationType '\(type)' is not 'create' or 'delete'")
            }
            guard let zone = try o.object("zone", at: path) else { throw APIError.badRequest("\(path).zone is missing") }
            // Spec: {zone: {zoneID: {...}}}; a bare {zone: {zoneName: ...}} is accepted too.
            let id = zone["zoneID"] != nil ? zone["zoneID"] : .object(zone)
            return (op, try ZoneIDCoding.require(id, at: path + ".zone.zoneID"))
        }
        let db = context.database
        let results = try ThreadBridge.wait {
            try await perItemResults(ops) { (op, id) -> RecordZone? in
                switch op {
                case .create: return try await db.createZone(id)
                case .delete:
                    try await db.deleteZone(id)
                    return nil
                }
            }
        }
        return Self.response { w in
            for ((_, id), r) in zip(ops, results) {
                switch r {
                case .success(let z?): Self.write(z, to: &w)
                case .success(nil):
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.write(id, owner: context.database.id.owner, to: &w)
                        w.member("deleted", true)
                    }
                case .failure(let e): ChangesCoding.writeError(e, zone: id, owner: context.database.id.owner, to: &w)
                }
            }
        }
    }

    private func checkCount(_ n: Int) throws {
        guard n <= Self.maxZones else {
            throw APIError.badRequest("\(n) zones in one request; the limit is \(Self.maxZones) (split the request)")
        }
    }

    private static func response(_ zones: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.key("zones")
            w.array(zones)
        }
        return w.bytes
    }

    /// `{zoneID, atomic}`: `atomic` is true for custom zones (CloudKit's atomic capability).
    private static func write(_ z: RecordZone, to w: inout JSONWriter) {
        w.object { w in
            w.key("zoneID")
            ZoneIDCoding.write(z.id, to: &w)
            w.member("atomic", z.capabilities.contains(.atomic))
        }
    }
}
