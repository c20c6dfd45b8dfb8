import CloudletCore
import CloudletModel

/// One zone's part of a `changes/zone` request (or the whole of a `records/changes` one): `{zoneID, syncToken?,
/// resultsLimit?, desiredKeys?, desiredRecordTypes?}`.
public struct ZoneChangesRequest: Sendable {
    public var zoneID: ZoneID
    public var token: ChangeToken?
    public var limit: Int?
    public var desiredKeys: [String]?
    public var desiredRecordTypes: [String]?

    public init(_ json: JSONValue, at path: String, defaultLimit: Int64?, zoneOptional: Bool = false) throws {
        let o = try json.requireObject(at: path)
        let zonePath = [String: JSONValue].join(path, "zoneID")
        if let z = try ZoneIDCoding.decode(o["zoneID"], at: zonePath) {
            zoneID = z
        } else if zoneOptional {
            zoneID = .default
        } else {
            throw APIError.badRequest("\(zonePath) is missing")
        }
        token = try ChangesCoding.token(o, at: [String: JSONValue].join(path, "syncToken"), key: "syncToken")
        let l = try o.int("resultsLimit", at: path) ?? defaultLimit
        if let l, l < 1 { throw APIError.badRequest("\([String: JSONValue].join(path, "resultsLimit")) must be at least 1") }
        limit = l.map { Int(min($0, Int64(CloudletLimits.changesPerPage))) }
        desiredKeys = try o.strings("desiredKeys", at: path)
        desiredRecordTypes = try o.strings("desiredRecordTypes", at: path)
    }
}

/// Change feeds on the wire: sync tokens (the engine's opaque change tokens in base64), a zone's page
/// `{zoneID, syncToken, moreComing, records}` with deletions as `{recordName, recordType, deleted: true, zoneID}`,
/// and per-zone errors.
public enum ChangesCoding {
    public static func token(_ o: [String: JSONValue], at path: String, key: String = "syncToken") throws -> ChangeToken? {
        guard let s = try o.string(key, at: "") else { return nil }
        guard let t = ChangeToken(base64: s) else {
            throw APIError.badRequest("\(path) is not a sync token this server issued (not base64)")
        }
        return t
    }

    public static func write(
        _ c: ZoneChanges, zone: ZoneID, owner: String, to w: inout JSONWriter, assetLinks: AssetLinks? = nil,
        viewer: ShareCoding.Viewer? = nil
    ) {
        w.object { w in
            w.key("zoneID")
            ZoneIDCoding.write(zone, owner: owner, to: &w)
            w.member("syncToken", c.token.base64)
            w.member("moreComing", c.moreComing)
            w.key("records")
            w.array { w in
                for change in c.changes {
                    switch change {
                    case .changed(let r):
                        RecordCoding.write(r, to: &w, desiredKeys: nil, numbersAsStrings: false, assetLinks: assetLinks, viewer: viewer)
                    case .deleted(let id, let type):
                        w.object { w in
                            w.member("recordName", id.recordName)
                            w.member("recordType", type)
                            w.member("deleted", true)
                            w.key("zoneID")
                            ZoneIDCoding.write(id.zoneID, to: &w)
                        }
                    }
                }
            }
        }
    }

    /// `{zoneID, serverErrorCode, reason, …}`: a zone's error in a response of the database owned by `owner`.
    public static func writeError(_ e: CloudletError, zone: ZoneID, owner: String, to w: inout JSONWriter) {
        w.object { w in
            w.key("zoneID")
            ZoneIDCoding.write(zone, owner: owner, to: &w)
            APIError(e).writeMembers(to: &w)
        }
    }

    /// `changes/database` and `zones/changes`: `{zones: [{zoneID} | {zoneID, deleted: true}], syncToken,
    /// moreComing}`.
    public static func write(_ changes: DatabaseChanges, to w: inout JSONWriter) {
        w.object { w in
            w.key("zones")
            w.array { w in
                for z in changes.changedZones {
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.write(z, to: &w)
                    }
                }
                for z in changes.deletedZones {
                    w.object { w in
                        w.key("zoneID")
                        ZoneIDCoding.write(z, to: &w)
                        w.member("deleted", true)
                    }
                }
            }
            w.member("syncToken", changes.token.base64)
            w.member("moreComing", changes.moreComing)
        }
    }
}
