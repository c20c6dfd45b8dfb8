import CloudletCore
import CloudletModel

/// Zone IDs on the wire: `{zoneName, ownerRecordName?}`; `ownerName` (used by some clients) is accepted too.
public enum ZoneIDCoding {
    /// The zone ID at `json`, or nil when absent or null. - Throws: `BAD_REQUEST` naming `path`.
    public static func decode(_ json: JSONValue?, at path: String) throws -> ZoneID? {
        guard let json, json != .null else { return nil }
        let o = try json.requireObject(at: path)
        guard let name = try o.string("zoneName", at: path), !name.isEmpty else {
            throw APIError.badRequest("\(path).zoneName is missing")
        }
        let owner = try o.string("ownerRecordName", at: path) ?? o.string("ownerName", at: path)
        return ZoneID(zoneName: name, ownerName: owner ?? defaultOwnerName)
    }

    /// The zone ID at `json`, which must be there. - Throws: `BAD_REQUEST` naming `path` when it is absent or null.
    public static func require(_ json: JSONValue?, at path: String) throws -> ZoneID {
        guard let id = try decode(json, at: path) else {
            throw APIError.badRequest("\(path) is missing: expected {zoneName, ownerRecordName}")
        }
        return id
    }

    public static func write(_ zone: ZoneID, to w: inout JSONWriter) {
        w.object { w in
            w.member("zoneName", zone.zoneName)
            w.member("ownerRecordName", zone.ownerName)
        }
    }
}
