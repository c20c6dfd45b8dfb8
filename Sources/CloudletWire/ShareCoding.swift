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
        /// `acceptanceStatus`, when given: `REMOVED` removes the participant (they stay listed as REMOVED); anything
        /// else, or nothing, for one who was removed invites them again. Otherwise acceptance is the participant's.
        public var acceptance: Share.Participant.Acceptance?
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
                let status = try o.string("acceptanceStatus", at: p).map { raw in
                    guard let a = Share.Participant.Acceptance(rawValue: raw) else {
                        throw APIError.badRequest("\(p).acceptanceStatus '\(raw)' is not one of PENDING, ACCEPTED, REMOVED")
                    }
                    return a
                }
                return ParsedShare.Participant(userRecordName: name, emailAddress: email, permission: perm, acceptance: status)
            }
        }
        return out
    }

    static func permission(_ s: String, at path: String) throws -> Share.Permission {
        guard let p = Share.Permission(rawValue: s) else {
            throw APIError.badRequest("\(path) '\(s)' is not one of NONE, READ_ONLY, READ_WRITE")
        }
        return p
    }

    /// Who a share's dictionary is written for: the caller (its `currentUserParticipant`) and the server's base URL
    /// (its `url`).
    public struct Viewer: Sendable {
        public var caller: String?
        public var baseURL: String

        public init(caller: String?, baseURL: String) {
            self.caller = caller
            self.baseURL = baseURL
        }
    }

    /// Writes `share` as a record dictionary, as `caller` (nil: nobody in particular) sees it.
    public static func write(_ s: Share, caller: String?, baseURL: String, to w: inout JSONWriter) {
        w.object { w in
            writeIdentity(s, to: &w)
            w.key("fields")
            w.object { _ in }
            w.member("deleted", false)
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

    /// `recordName, recordType, recordChangeTag?, zoneID, forRecord?` of a share's record dictionary.
    private static func writeIdentity(_ s: Share, to w: inout JSONWriter) {
        w.member("recordName", s.id.recordName)
        w.member("recordType", Share.recordType)
        if let tag = s.changeTag { w.member("recordChangeTag", tag) }
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

// MARK: - Clients

extension ShareCoding {
    /// Writes the `records/modify` operation that saves `share`: `create` for a new one, `update` with its change tag
    /// otherwise; participants by `userRecordName`.
    public static func writeSaveOperation(_ s: Share, createShortGUID: Bool, to w: inout JSONWriter) {
        w.object { w in
            w.member("operationType", s.changeTag == nil ? "create" : "update")
            w.key("record")
            w.object { w in
                writeIdentity(s, to: &w)
                w.member("createShortGUID", createShortGUID)
                w.member("publicPermission", s.publicPermission.rawValue)
                w.key("participants")
                w.array { w in
                    for p in s.participants {
                        w.object { w in
                            w.key("userIdentity")
                            w.object { w in
                                w.member("userRecordName", p.userRecordName)
                                if let e = p.emailAddress {
                                    w.key("lookupInfo")
                                    w.object { w in w.member("emailAddress", e) }
                                }
                            }
                            w.member("permission", p.permission.rawValue)
                            if p.acceptance == .removed { w.member("acceptanceStatus", p.acceptance.rawValue) }
                        }
                    }
                }
            }
        }
    }

    /// A share from its record dictionary (what ``write(_:caller:baseURL:to:)`` writes). - Throws: `BAD_REQUEST`
    /// naming the member.
    public static func decodeShare(_ o: [String: JSONValue], at path: String, zone: ZoneID) throws -> Share {
        guard let name = try o.string("recordName", at: path), !name.isEmpty else {
            throw APIError.badRequest("\(path).recordName is missing")
        }
        let zoneID = try ZoneIDCoding.decode(o["zoneID"], at: path + ".zoneID") ?? zone
        let root = try o.object("forRecord", at: path).flatMap { try $0.string("recordName", at: path + ".forRecord") }
        var s = root.map { Share(root: RecordID(recordName: $0, zoneID: zoneID), recordName: name) } ?? Share(zone: zoneID)
        s.id = RecordID(recordName: name, zoneID: zoneID)
        s.changeTag = try o.string("recordChangeTag", at: path)
        s.shortGUID = try o.string("shortGUID", at: path)
        if let p = try o.string("publicPermission", at: path) { s.publicPermission = try permission(p, at: path + ".publicPermission") }
        s.owner = zoneID.ownerName
        for (i, item) in (try o.array("participants", at: path) ?? []).enumerated() {
            let p = try decodeParticipant(item, at: "\(path).participants[\(i)]")
            if p.type == .owner { s.owner = p.userRecordName } else { s.participants.append(p) }
        }
        return s
    }

    static func decodeParticipant(_ json: JSONValue, at path: String) throws -> Share.Participant {
        let o = try json.requireObject(at: path)
        let identity = try o.object("userIdentity", at: path) ?? [:]
        guard let user = try identity.string("userRecordName", at: path + ".userIdentity") else {
            throw APIError.badRequest("\(path).userIdentity.userRecordName is missing")
        }
        let email = try identity.object("lookupInfo", at: path + ".userIdentity")?.string("emailAddress", at: path + ".userIdentity.lookupInfo")
        func value<E: RawRepresentable>(_ key: String, _: E.Type) throws -> E where E.RawValue == String {
            guard let raw = try o.string(key, at: path), let v = E(rawValue: raw) else {
                throw APIError.badRequest("\(path).\(key) is missing or unknown")
            }
            return v
        }
        return Share.Participant(
            userRecordName: user, emailAddress: email, type: try value("type", Share.ParticipantType.self),
            permission: try value("permission", Share.Permission.self), acceptance: try value("acceptanceStatus", Share.Participant.Acceptance.self))
    }

    /// One `records/resolve` or `records/accept` result (``writeMetadata(_:shortGUID:container:environment:caller:baseURL:to:writeRecord:)``).
    public static func decodeMetadata(_ o: [String: JSONValue], at path: String) throws -> ShareMetadata {
        guard let shareJSON = try o.object("share", at: path) else { throw APIError.badRequest("\(path).share is missing") }
        let zone = try ZoneIDCoding.require(o["zoneID"], at: path + ".zoneID")
        let share = try decodeShare(shareJSON, at: path + ".share", zone: zone)
        var me: Share.Participant?
        if let current = shareJSON["currentUserParticipant"] {
            me = try decodeParticipant(current, at: path + ".share.currentUserParticipant")
        }
        let root = try o.object("rootRecord", at: path).map { try RecordCoding.decode($0, at: path + ".rootRecord", zone: zone, lossless: true) }
        return ShareMetadata(share: share, callerParticipant: me, rootRecord: root)
    }
}
