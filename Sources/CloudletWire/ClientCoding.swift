import CloudletCore
import CloudletModel

/// The other direction of the codings: the requests a client writes and the responses it reads back, in the
/// shapes the server's handlers read and write (so one module describes both ends of every exchange). Used by
/// `CloudletClient`; faults in a response are `BAD_REQUEST`-coded errors naming the member, as for requests.
public enum ClientCoding {
    /// A `records/modify` operation: `{operationType, record: {recordName, recordType, recordChangeTag?, fields,
    /// zoneID}}`. Deletions carry the name, the zone and (for `delete`) the change tag only.
    public static func writeOperation(_ op: RecordOperation, to w: inout JSONWriter) {
        w.object { w in
            w.member("operationType", op.operationType)
            w.key("record")
            w.object { w in
                switch op {
                case .create(let r), .update(let r), .forceUpdate(let r), .replace(let r), .forceReplace(let r):
                    w.member("recordName", r.recordName)
                    w.member("recordType", r.recordType)
                    if let tag = r.changeTag { w.member("recordChangeTag", tag) }
                    if let p = r.parent {
                        w.key("parent")
                        w.object { w in w.member("recordName", p.recordName) }
                    }
                    w.key("fields")
                    w.object { w in
                        for name in r.fields.keys.sorted() {
                            w.key(name)
                            FieldCoding.write(r.fields[name]!, to: &w, numbersAsStrings: false, zone: r.id.zoneID)
                        }
                    }
                case .delete(let id, let tag):
                    w.member("recordName", id.recordName)
                    w.member("recordChangeTag", tag)
                case .forceDelete(let id):
                    w.member("recordName", id.recordName)
                }
                w.key("zoneID")
                ZoneIDCoding.writeRequest(op.recordID.zoneID, to: &w)
            }
        }
    }

    /// The error a response (or a per-item dictionary) carries, as the engine's error: Cloudlet's own code when
    /// named, else the code of its `serverErrorCode`; a `CONFLICT` / `EXISTS` keeps its `serverRecord`.
    public static func error(_ o: [String: JSONValue], at path: String, zone: ZoneID, status: Int? = nil) throws
        -> CloudletError?
    {
        guard let api = APIError(json: o, status: status) else { return nil }
        var e = api.cloudletError
        if let server = try o.object("serverRecord", at: path) {
            e.serverRecord = try RecordCoding.decode(server, at: [String: JSONValue].join(path, "serverRecord"), zone: zone)
        }
        return e
    }

    /// One entry of a `records/modify` or `records/lookup` response, for the record `id` it answers (a share's
    /// dictionary as the share's record: ``record(_:at:zone:)``).
    public static func recordResult(_ json: JSONValue, at path: String, for id: RecordID) throws -> RecordResult {
        let o = try json.requireObject(at: path)
        if let e = try error(o, at: path, zone: id.zoneID) { return .failed(id, e) }
        if try o.bool("deleted", at: path) == true { return .deleted(id) }
        return .saved(try record(o, at: path, zone: id.zoneID))
    }

    /// The results of a `records/lookup` or `records/modify` response, read from its bytes: one per record in `ids`,
    /// in order. Plain records are read straight from the bytes (``RecordCoding/read(_:at:zone:lossless:)``),
    /// anything else (errors, deletions, shares) through ``recordResult(_:at:for:)``.
    public static func recordResults(_ body: [UInt8], for ids: [RecordID]) throws -> [RecordResult] {
        var out: [RecordResult] = []
        out.reserveCapacity(ids.count)
        try readRecords(body) { p, i in
            guard i < ids.count else { throw APIError.badRequest("response has more records than the \(ids.count) requested") }
            if let r = try RecordCoding.read(&p, at: "records[\(i)]", zone: ids[i].zoneID, lossless: true) {
                out.append(.saved(r))
            } else {
                out.append(try recordResult(p.readValue(), at: "records[\(i)]", for: ids[i]))
            }
        }
        guard out.count == ids.count else {
            throw APIError.badRequest("response has \(out.count) records for \(ids.count) requested")
        }
        return out
    }

    /// A `records/query` response read from its bytes: its records (in `zone` unless they name theirs; a share's
    /// dictionary through ``record(_:at:zone:)``) and its `continuationMarker`.
    public static func queryResults(_ body: [UInt8], zone: ZoneID) throws -> (records: [Record], continuationMarker: String?) {
        var records: [Record] = []
        var marker: String?
        try readRecords(body) { p, i in
            if let r = try RecordCoding.read(&p, at: "records[\(i)]", zone: zone, lossless: true) {
                records.append(r)
            } else {
                let item = try p.readValue()
                records.append(try record(item.requireObject(at: "records[\(i)]"), at: "records[\(i)]", zone: zone))
            }
        } other: { p, key in
            guard key == "continuationMarker" else { return false }
            if try !p.readNull() { marker = try p.readString() }
            return true
        }
        return (records, marker)
    }

    /// Walks a response object: each item of its `records` array goes to `record`; `other` reads the other members
    /// it wants (returning true), the rest are skipped. A response that is not an object, or names `records` twice,
    /// is malformed.
    private static func readRecords(
        _ body: [UInt8], record: (inout JSONParser, Int) throws -> Void,
        other: (inout JSONParser, String) throws -> Bool = { _, _ in false }
    ) throws {
        var sawRecords = false
        try JSONParser.read(body) { p in
            try p.readObject { p, key in
                if key == "records" {
                    guard !sawRecords else { throw APIError.badRequest("response has records twice") }
                    sawRecords = true
                    if try !p.readNull() { try p.readArray(record) }
                } else if try !other(&p, key) {
                    _ = try p.readValue()
                }
            }
        }
    }

    /// The `records` list of a response, checked to hold `count` entries (one per request item, in order).
    public static func items(_ body: [String: JSONValue], key: String, count: Int) throws -> [JSONValue] {
        guard let items = try body.array(key, at: "") else { throw APIError.badRequest("response has no \(key)") }
        guard items.count == count else {
            throw APIError.badRequest("response has \(items.count) \(key) for \(count) requested")
        }
        return items
    }

    /// A zone of `zones/list`, `zones/lookup` or `zones/modify`: `{zoneID, atomic}`.
    public static func zone(_ json: JSONValue, at path: String) throws -> Result<RecordZone, CloudletError> {
        let o = try json.requireObject(at: path)
        let id = try ZoneIDCoding.require(o["zoneID"], at: path + ".zoneID")
        if let e = try error(o, at: path, zone: id) { return .failure(e) }
        var caps: RecordZone.Capabilities = [.fetchChanges]
        if try o.bool("atomic", at: path) == true { caps.insert(.atomic) }
        return .success(RecordZone(id: id, capabilities: caps))
    }

    /// A zone's page of `changes/zone` (or the body of `records/changes`): `{zoneID, syncToken, moreComing,
    /// records}`, a deleted record being `{recordName, recordType, deleted: true}`.
    public static func zoneChanges(_ o: [String: JSONValue], at path: String, zone: ZoneID) throws -> ZoneChanges {
        if let e = try error(o, at: path, zone: zone) { throw e }
        guard let token = try ChangesCoding.token(o, at: [String: JSONValue].join(path, "syncToken")) else {
            throw APIError.badRequest("\([String: JSONValue].join(path, "syncToken")) is missing")
        }
        var changes: [RecordChange] = []
        for (i, item) in (try o.array("records", at: path) ?? []).enumerated() {
            let p = [String: JSONValue].join(path, "records[\(i)]")
            let r = try item.requireObject(at: p)
            if try r.bool("deleted", at: p) == true {
                guard let name = try r.string("recordName", at: p) else { throw APIError.badRequest("\(p).recordName is missing") }
                let z = try ZoneIDCoding.decode(r["zoneID"], at: p + ".zoneID") ?? zone
                changes.append(.deleted(RecordID(recordName: name, zoneID: z), recordType: try r.string("recordType", at: p) ?? ""))
            } else {
                changes.append(.changed(try record(r, at: p, zone: zone)))
            }
        }
        return ZoneChanges(changes: changes, token: token, moreComing: try o.bool("moreComing", at: path) ?? false)
    }

    /// `changes/database`: `{zones: [{zoneID, deleted?}], syncToken, moreComing}`.
    public static func databaseChanges(_ o: [String: JSONValue]) throws -> DatabaseChanges {
        guard let token = try ChangesCoding.token(o, at: "syncToken") else { throw APIError.badRequest("syncToken is missing") }
        var changed: [ZoneID] = []
        var deleted: [ZoneID] = []
        for (i, item) in (try o.array("zones", at: "") ?? []).enumerated() {
            let z = try item.requireObject(at: "zones[\(i)]")
            let id = try ZoneIDCoding.require(z["zoneID"], at: "zones[\(i)].zoneID")
            if try z.bool("deleted", at: "zones[\(i)]") == true { deleted.append(id) } else { changed.append(id) }
        }
        return DatabaseChanges(
            changedZones: changed, deletedZones: deleted, token: token, moreComing: try o.bool("moreComing", at: "") ?? false)
    }

    /// A subscription of `subscriptions/*`, or its per-item error.
    public static func subscription(_ json: JSONValue, at path: String) throws -> Result<Subscription, CloudletError> {
        let o = try json.requireObject(at: path)
        if let e = try error(o, at: path, zone: .default) { return .failure(e) }
        return .success(try SubscriptionCoding.decode(o, at: path))
    }

    /// A long-poll answer `{notifications, next, gap}` for the caller's `database` (whose scope each notification
    /// names; a notification does not carry the commit position it came from on the wire, so that is 0).
    public static func notifications(_ o: [String: JSONValue], database: DatabaseID) throws -> NotificationBatch {
        guard let nextText = try o.string("next", at: ""), let next = NotificationID(nextText) else {
            throw APIError.badRequest("next is missing or not a notification ID")
        }
        let out = try (o.array("notifications", at: "") ?? []).enumerated().map { i, item in
            try notification(item.requireObject(at: "notifications[\(i)]"), at: "notifications[\(i)]", database: database)
        }
        return NotificationBatch(notifications: out, next: next, gap: try o.bool("gap", at: "") ?? false)
    }

    /// One notification: `{notificationID, subscriptionID, queryNotificationReason, recordName, recordType, zoneID,
    /// databaseScope, fields, alertBody?}` (a long-poll's item, or a websocket message).
    public static func notification(_ n: [String: JSONValue], at p: String, database: DatabaseID) throws -> RecordNotification {
        guard let idText = try n.string("notificationID", at: p), let id = NotificationID(idText) else {
            throw APIError.badRequest("\(p).notificationID is missing or malformed")
        }
        guard let reasonText = try n.string("queryNotificationReason", at: p),
            let reason = NotificationReason(rawValue: reasonText)
        else { throw APIError.badRequest("\(p).queryNotificationReason is missing or unknown") }
        guard let name = try n.string("recordName", at: p) else { throw APIError.badRequest("\(p).recordName is missing") }
        let zone = try ZoneIDCoding.decode(n["zoneID"], at: p + ".zoneID") ?? .default
        var db = database
        if let s = try n.string("databaseScope", at: p), let scope = DatabaseScope(rawValue: s) { db.scope = scope }
        var fields: [String: FieldValue] = [:]
        for (k, v) in try n.object("fields", at: p) ?? [:] {
            fields[k] = try FieldCoding.decode(v, at: "\(p).fields.\(k)", schemaType: nil, zone: zone, lossless: true)
        }
        return RecordNotification(
            id: id, partition: 0, lsn: 0, subscriptionID: try n.string("subscriptionID", at: p) ?? "", database: db,
            reason: reason, recordID: RecordID(recordName: name, zoneID: zone), recordType: try n.string("recordType", at: p) ?? "",
            fields: fields, alertBody: try n.string("alertBody", at: p))
    }
}

extension ClientCoding {
    /// A record of a response, as the embedded engine has it: a share's dictionary (`cloudkit.share`) becomes the share's
    /// record (``Share/record(changeTag:created:modified:)``), which `Share(record:)` reads.
    public static func record(_ o: [String: JSONValue], at path: String, zone: ZoneID) throws -> Record {
        let r = try RecordCoding.decode(o, at: path, zone: zone, lossless: true)
        guard r.recordType == Share.recordType else { return r }
        let s = try ShareCoding.decodeShare(o, at: path, zone: r.id.zoneID)
        return s.record(changeTag: r.changeTag ?? "", created: r.created, modified: r.modified)
    }
}

