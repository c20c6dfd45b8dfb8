import CloudletCore
import CloudletModel

/// Zone IDs on the wire: `{zoneName, ownerRecordName, zoneType}`, as CloudKit Web Services writes them.
///
/// - **Owner.** The public database's zones are owned by `_defaultOwner` in CloudKit's responses
///   (``publicOwnerName``); a private or shared zone by its owner's user record name. Inside Cloudlet the public
///   owner (and "the current user" of a request) is ``defaultOwnerName`` (`__defaultOwner__`), so the two names are
///   translated here, in one place: on input `_defaultOwner`, `__defaultOwner__`, an empty owner and no owner at all
///   all mean ``defaultOwnerName``; on output it is written `_defaultOwner`. `ownerName` (used by some clients) is
///   read like `ownerRecordName`.
/// - **Zone type.** Written as CloudKit does: `DEFAULT_ZONE` for `_defaultZone`, `REGULAR_CUSTOM_ZONE` for every
///   other zone. Read and ignored on input (the zone name decides it).
public enum ZoneIDCoding {
    /// The owner CloudKit's responses give the public database's zones.
    public static let publicOwnerName = "_defaultOwner"

    /// The zone ID at `json`, or nil when absent or null. - Throws: `BAD_REQUEST` naming `path`.
    public static func decode(_ json: JSONValue?, at path: String) throws -> ZoneID? {
        guard let json, json != .null else { return nil }
        let o = try json.requireObject(at: path)
        guard let name = try o.string("zoneName", at: path), !name.isEmpty else {
            throw APIError.badRequest("\(path).zoneName is missing")
        }
        let owner = try o.string("ownerRecordName", at: path) ?? o.string("ownerName", at: path)
        return ZoneID(zoneName: name, ownerName: internalOwner(owner))
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
            w.member("ownerRecordName", wireOwner(zone.ownerName))
            w.member("zoneType", zone.isDefault ? "DEFAULT_ZONE" : "REGULAR_CUSTOM_ZONE")
        }
    }

    /// Writes `zone` as a request names it: its name, and its owner only when that is not the caller's own
    /// database's (a missing `ownerRecordName` means it, as in CloudKit JS; `zoneType` is for responses). The
    /// shorter form is what the client sends.
    public static func writeRequest(_ zone: ZoneID, to w: inout JSONWriter) {
        w.object { w in
            w.member("zoneName", zone.zoneName)
            if zone.ownerName != defaultOwnerName { w.member("ownerRecordName", zone.ownerName) }
        }
    }

    /// Writes `zone` as a response of the database owned by `owner` names it: a zone of ``defaultOwnerName`` (a
    /// request's "the current user") as `owner`'s — the user's record name in a private database, `_defaultOwner`
    /// in the public one.
    public static func write(_ zone: ZoneID, owner: String, to w: inout JSONWriter) {
        write(zone.ownerName == defaultOwnerName ? ZoneID(zoneName: zone.zoneName, ownerName: owner) : zone, to: &w)
    }

    /// An owner name as a request gives it, as Cloudlet names it (nil, empty, `_defaultOwner` and
    /// `__defaultOwner__` are ``defaultOwnerName``).
    public static func internalOwner(_ owner: String?) -> String {
        guard let owner, !owner.isEmpty, owner != publicOwnerName else { return defaultOwnerName }
        return owner
    }

    /// An owner name as responses write it (``defaultOwnerName`` is ``publicOwnerName``).
    public static func wireOwner(_ owner: String) -> String { owner == defaultOwnerName ? publicOwnerName : owner }
}
