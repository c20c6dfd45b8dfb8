import CloudletCore
import CloudletModel

/// What a `records/modify` operation on a share (a record of type `cloudkit.share`) asks for, checked for shape.
/// Absent members keep what a saved share has.
public struct ParsedShare: Sendable {
    /// One entry of `participants`: who (`userIdentity.userRecordName`, or `userIdentity.lookupInfo`'s
    /// `userRecordName` or `emailAddress`) and with what permission.
    public struct Participant: Sendable {
        public var userRecordName: String?
        public var emailAddress: String?
        public var permission: Share.Permission
    }

    public var publicPermission: Share.Permission?
    public var participants: [Participant]?
    /// The root record (`forRecord`), when the share dictionary names it.
    public var forRecord: RecordID?
    /// `createShortGUID` (on the record or the operation): give the share a short GUID and URL. Cloudlet gives every
    /// share one unless this is `false`.
    public var createShortGUID: Bool
}

/// Share dictionaries on the wire: a share is written as a record dictionary of type `cloudkit.share` with
/// `shortGUID`, `url`, `publicPermission`, `participants`, `owner` and `currentUserParticipant`, and read from a
/// `records/modify` operation's record; share metadata (`records/resolve`, `records/accept`).
public enum ShareCoding {
    /// The share's stable URL: `<base>/share/<shortGUID>`.
    public static func url(base: String, shortGUID: String) -> String { "\(base)/share/\(shortGUID)" }

    /// Reads the share members of `record` (the record dictionary of `operations[i]`, at `path`).
    public static func decode(_ record: [String: JSONValue], operation: [String: JSONValue], at path: String) throws -> ParsedShare {
        var out = ParsedShare(
            publicPermission: nil, participants: nil, forRecord: nil,
            createShortGUID: try record.bool("createShortGUID", at: path) ?? operation.bool("createShortGUID", at: path) ?? true)
        if let p = try record.string("publicPermission", at: path) {
            out.publicPermission = try permission(p, at: path + ".publicPermission")
        }
        if let f = try record.object("forRecord", at: path) {
            guard let name = try f.string("recordName", at: path + ".forRecord"), !name.isEmpty else {
                throw APIError.badRequest("\(path).forRecord.recordName is missing")
            }
            let zone = try ZoneIDCoding.decode(f["zoneID"], at: path + ".forRecord.zoneID")
            out.forRecord = RecordID(recordName: name, zoneID: zone ?? .default)
        }
        if let items = try record.array("participants", at: path) {
            guard items.count < Share.maxParticipants else {
                throw APIError.badRequest("\(path).participants has \(items.count) entries; a share has at most \(Share.maxParticipants) participants, the owner included")
            }
            out.participants = try items.enumerated().compactMap { i, item in
                let p = "\(path).participants[\(i)]"
                let o = try item.requireObject(at: p)
                let identity = try o.object("userIdentity", at: p) ?? [:]
                let lookup = try identity.object("lookupInfo", at: p + ".userIdentity") ?? [:]
                let type = try o.string("type", at: p)
                if type == "OWNER" { return nil }  // the owner is not a participant to save (clients send it back)
                let name = try identity.string("userRecordName", at: p + ".userIdentity")
                    ?? lookup.string("userRecordName", at: p + ".userIdentity.lookupInfo")
                let email = try lookup.string("emailAddress", at: p + ".userIdentity.lookupInfo")
                guard name != nil || email != nil else {
                    throw APIError.badRequest(
                        "\(p).userIdentity names no one: give userRecordName, or lookupInfo.emailAddress or lookupInfo.userRecordName")
                }
                let perm = try o.string("permission", at: p).map { try permission($0, at: p + ".permission") } ?? .readOnly
                guard perm != .none else { throw APIError.badRequest("\(p).permission is NONE; give READ_ONLY or READ_WRITE") }
                return ParsedShare.Participant(userRecordName: name, emailAddress: email, permission: perm)
            }
        }
        return out
    }

    private static func permission(_ s: String, at path: String) throws -> Share.Permission {
        guard let p = Share.Permission(rawValue: s) else {
            throw APIError.badRequest("\(path) '\(s)' is not one of NONE, READ_ONLY, READ_WRITE")
        }
        return p
    }

    /// Writes `share` as a record dictionary, as `caller` (nil: nobody in particular) sees it.
    public static func write(_ s: Share, caller: String?, baseURL: String, to w: inout JSONWriter) {
        w.object { w in
            w.member("recordName", s.id.recordName)
            w.member("recordType", Share.recordType)
            if let tag = s.changeTag { w.member("recordChangeTag", tag) }
            w.key("fields")
            w.object { _ in }
            w.member("deleted", false)
            w.key("zoneID")
            ZoneIDCoding.write(s.id.zoneID, to: &w)
            if let root = s.rootRecordName {
                w.key("forRecord")
                w.object { w in
                    w.member("recordName", root)
                    w.key("zoneID")
                    ZoneIDCoding.write(s.id.zoneID, to: &w)
                }
            }
            if let g = s.shortGUID {
                w.member("shortGUID", g)
                w.member("url", url(base: baseURL, shortGUID: g))
            }
            w.member("publicPermission", s.publicPermission.rawValue)
            w.key("owner")
            writeParticipant(owner(of: s), to: &w)
            w.key("participants")
            w.array { w in
                writeParticipant(owner(of: s), to: &w)
                for p in s.participants { writeParticipant(p, to: &w) }
            }
            if let caller, let me = caller == s.owner ? owner(of: s) : s.participant(caller) {
                w.key("currentUserParticipant")
                writeParticipant(me, to: &w)
            }
        }
    }

    /// The owner as a participant entry.
    public static func owner(of s: Share) -> Share.Participant {
        Share.Participant(userRecordName: s.owner, type: .owner, permission: .readWrite, acceptance: .accepted)
    }

    /// `{participantId, userIdentity: {userRecordName, lookupInfo}, type, permission, acceptanceStatus}`.
    public static func writeParticipant(_ p: Share.Participant, to w: inout JSONWriter) {
        w.object { w in
            w.member("participantId", p.userRecordName)
            w.key("userIdentity")
            w.object { w in
                w.member("userRecordName", p.userRecordName)
                w.key("lookupInfo")
                w.object { w in
                    if let e = p.emailAddress { w.member("emailAddress", e) }
                    w.member("userRecordName", p.userRecordName)
                }
            }
            w.member("type", p.type.rawValue)
            w.member("permission", p.permission.rawValue)
            w.member("acceptanceStatus", p.acceptance.rawValue)
        }
    }

    /// Writes one `records/resolve` or `records/accept` result: `{shortGUID, containerIdentifier, environment,
    /// zoneID, rootRecordName?, share, ownerIdentity, participantType?, participantPermission?, participantStatus?,
    /// rootRecord?}`.
    public static func writeMetadata(
        _ m: ShareMetadata, shortGUID: String, container: String, environment: String, caller: String?, baseURL: String,
        to w: inout JSONWriter, writeRecord: (Record, inout JSONWriter) -> Void
    ) {
        w.object { w in
            w.member("shortGUID", shortGUID)
            w.member("containerIdentifier", container)
            w.member("environment", environment)
            w.key("zoneID")
            ZoneIDCoding.write(m.share.id.zoneID, to: &w)
            if let root = m.share.rootRecordName { w.member("rootRecordName", root) }
            w.key("share")
            write(m.share, caller: caller, baseURL: baseURL, to: &w)
            w.key("ownerIdentity")
            w.object { w in w.member("userRecordName", m.share.owner) }
            if let me = m.callerParticipant {
                w.member("participantType", me.type.rawValue)
                w.member("participantPermission", me.permission.rawValue)
                w.member("participantStatus", me.acceptance.rawValue)
            }
            if let r = m.rootRecord {
                w.key("rootRecord")
                writeRecord(r, &w)
            }
        }
    }

    /// `{shortGUIDs: [{value, shouldFetchRootRecord?} | "value"]}` (at most 200) → (value, fetch root) pairs.
    public static func decodeShortGUIDs(_ body: [String: JSONValue]) throws -> [(value: String, fetchRoot: Bool)] {
        let items = try body.requiredList("shortGUIDs", limit: CloudletLimits.operationsPerRequest, per: "request")
        return try items.enumerated().map { i, item in
            if let s = item.stringValue { return (s, false) }
            let o = try item.requireObject(at: "shortGUIDs[\(i)]")
            guard let v = try o.string("value", at: "shortGUIDs[\(i)]"), !v.isEmpty else {
                throw APIError.badRequest("shortGUIDs[\(i)].value is missing")
            }
            return (v, try o.bool("shouldFetchRootRecord", at: "shortGUIDs[\(i)]") ?? false)
        }
    }
}
