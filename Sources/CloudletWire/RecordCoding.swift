import CloudletCore
import CloudletModel

/// Record dictionaries on the wire: `{recordName, recordType, recordChangeTag, fields, created, modified, deleted,
/// zoneID}`, and the per-record error dictionaries that stand in for a record in `records/modify` and
/// `records/lookup` responses.
public enum RecordCoding {
    /// Writes a record. `desiredKeys` limits the fields written (nil: all; empty: none).
    /// Assets get the `downloadURL` `assetLinks` gives them; `share` is the share the record is the root of, if any.
    /// A share's record (`cloudkit.share`, as a zone's change feed or a lookup returns it) is written as the share's
    /// dictionary (``ShareCoding/write(_:caller:baseURL:to:)``), as `viewer` sees it.
    public static func write(
        _ r: Record, to w: inout JSONWriter, desiredKeys: Set<String>?, numbersAsStrings: Bool, assetLinks: AssetLinks? = nil,
        share: RecordID? = nil, viewer: ShareCoding.Viewer? = nil
    ) {
        if r.recordType == Share.recordType, let s = try? Share(record: r) {
            ShareCoding.write(s, caller: viewer?.caller, baseURL: viewer?.baseURL ?? "", to: &w)
            return
        }
        w.object { w in
            writeMembers(r, to: &w, desiredKeys: desiredKeys, numbersAsStrings: numbersAsStrings, assetLinks: assetLinks)
            if let share {
                w.key("share")
                w.object { w in
                    w.member("recordName", share.recordName)
                    w.key("zoneID")
                    ZoneIDCoding.write(share.zoneID, to: &w)
                }
            }
        }
    }

    /// Writes a record's members into an object being written (an export line adds its own around them).
    public static func writeMembers(
        _ r: Record, to w: inout JSONWriter, desiredKeys: Set<String>?, numbersAsStrings: Bool, assetLinks: AssetLinks? = nil
    ) {
        w.member("recordName", r.recordName)
        w.member("recordType", r.recordType)
        if let tag = r.changeTag { w.member("recordChangeTag", tag) }
        w.key("fields")
        w.object { w in
            for name in r.fields.keys.sorted() where desiredKeys?.contains(name) ?? true {
                w.key(name)
                FieldCoding.write(
                    r.fields[name]!, to: &w, numbersAsStrings: numbersAsStrings, zone: r.id.zoneID, assetLinks: assetLinks)
            }
        }
        if let c = r.created { writeStamp("created", c, to: &w) }
        if let m = r.modified { writeStamp("modified", m, to: &w) }
        if let p = r.parent {
            w.key("parent")
            w.object { w in w.member("recordName", p.recordName) }
        }
        w.member("deleted", false)
        w.key("zoneID")
        ZoneIDCoding.write(r.id.zoneID, to: &w)
    }

    /// A whole record as ``write(_:to:desiredKeys:numbersAsStrings:)`` writes it (a lookup's, query's or change
    /// feed's record, or an export line): name, type, change tag, fields, stamps. The zone is the dictionary's
    /// `zoneID`, else `zone`. Fields are decoded as ``FieldCoding/decode(_:at:schemaType:zone:lossless:)``; the
    /// older spelling `changeTag` of the change tag is read too. - Throws: `BAD_REQUEST` naming the member.
    public static func decode(_ o: [String: JSONValue], at path: String, zone: ZoneID, lossless: Bool = false) throws -> Record {
        guard let name = try o.string("recordName", at: path), !name.isEmpty else {
            throw APIError.badRequest("\([String: JSONValue].join(path, "recordName")) is missing")
        }
        guard let type = try o.string("recordType", at: path), !type.isEmpty else {
            throw APIError.badRequest("\([String: JSONValue].join(path, "recordType")) is missing")
        }
        let zoneID = try ZoneIDCoding.decode(o["zoneID"], at: [String: JSONValue].join(path, "zoneID")) ?? zone
        var r = Record(recordType: type, recordName: name, zoneID: zoneID)
        if let fields = try o.object("fields", at: path) {
            r.fields.reserveCapacity(fields.count)
            for (k, v) in fields {
                r.fields[k] = try FieldCoding.decode(
                    v, at: [String: JSONValue].join(path, "fields") + "." + k, schemaType: nil, zone: zoneID, lossless: lossless)
            }
        }
        r.changeTag = try o.string("recordChangeTag", at: path) ?? o.string("changeTag", at: path)
        r.created = try stamp(o, "created", at: path)
        r.modified = try stamp(o, "modified", at: path)
        r.parent = try parentName(o, at: path).map { RecordID(recordName: $0, zoneID: zoneID) }
        return r
    }

    /// Reads a record dictionary as ``decode(_:at:zone:lossless:)`` decodes it, straight from `p` (no ``JSONValue``
    /// tree: the client's lookups, queries and saves read their answers this way). Only a plain record as
    /// ``write(_:to:desiredKeys:numbersAsStrings:assetLinks:share:viewer:)`` writes it is read here; for anything
    /// else — an error, a deletion, a share, a member it does not know or repeated — it returns nil with `p` back
    /// where it was, for the caller to decode the value through the tree.
    public static func read(_ p: inout JSONParser, at path: @autoclosure () -> String, zone: ZoneID, lossless: Bool) throws
        -> Record?
    {
        let start = p.mark
        do {
            return try readPlain(&p, at: path(), zone: zone, lossless: lossless)
        } catch is NotPlain {
            p.reset(to: start)
            return nil
        } catch is JSONParser.Error {
            // The tree's decoding names what is wrong (a member of the wrong kind, a syntax error) as it always has.
            p.reset(to: start)
            return nil
        }
    }

    private struct NotPlain: Error {}

    private static func readPlain(_ p: inout JSONParser, at path: @autoclosure () -> String, zone: ZoneID, lossless: Bool)
        throws -> Record
    {
        var name: String?, type: String?, tag: String?, parent: String?, zoneID: ZoneID?
        var created: RecordStamp?, modified: RecordStamp?
        // Fields are decoded as they are read, in `zone`: the record's own `zoneID` comes after them. Where it turns
        // out to name another zone (only references depend on it), or a field did not decode, they are read again
        // from `fieldsStart` in the record's zone, which then decides.
        var fields: [String: FieldValue] = [:]
        var fieldsStart: JSONParser?
        var fieldFailed = false
        var seen: UInt16 = 0
        func once(_ bit: UInt16) throws {
            if seen & bit != 0 { throw NotPlain() }
            seen |= bit
        }
        try p.readObject { p, key in
            switch key {
            case "recordName": try once(1); name = try p.readString()
            case "recordType": try once(2); type = try p.readString()
            case "recordChangeTag": try once(4); tag = try p.readString()
            case "fields":
                try once(8)
                fieldsStart = p
                fieldFailed = try readFields(&p, into: &fields, at: path(), zone: zone, lossless: lossless, throwing: false)
            case "created": try once(16); created = try readStamp(&p)
            case "modified": try once(32); modified = try readStamp(&p)
            case "parent":
                try once(64)
                if try p.readNull() { break }
                try p.readObject { p, key in
                    guard key == "recordName", parent == nil else { throw NotPlain() }
                    parent = try p.readString()
                }
                if parent?.isEmpty ?? true { throw NotPlain() }
            case "deleted":
                try once(128)
                guard try p.readValue() == .bool(false) else { throw NotPlain() }
            case "zoneID":
                try once(256)
                var zoneName: String?, owner: String?
                try p.readObject { p, key in
                    switch key {
                    case "zoneName" where zoneName == nil: zoneName = try p.readString()
                    case "ownerRecordName" where owner == nil: owner = try p.readString()
                    case "zoneType": _ = try p.readString()
                    default: throw NotPlain()
                    }
                }
                guard let zoneName, !zoneName.isEmpty else { throw NotPlain() }
                zoneID = ZoneID(zoneName: zoneName, ownerName: ZoneIDCoding.internalOwner(owner))
            default: throw NotPlain()
            }
        }
        // A share's dictionary is decoded by the tree path (``ClientCoding/record(_:at:zone:)``) whatever it holds.
        guard let name, !name.isEmpty, let type, !type.isEmpty, type != Share.recordType else { throw NotPlain() }
        let z = zoneID ?? zone
        if var again = fieldsStart, fieldFailed || z.zoneName != zone.zoneName {
            fields.removeAll(keepingCapacity: true)
            _ = try readFields(&again, into: &fields, at: path(), zone: z, lossless: lossless, throwing: true)
        }
        var r = Record(recordType: type, recordName: name, zoneID: z)
        r.fields = fields
        r.changeTag = tag
        r.created = created
        r.modified = modified
        r.parent = parent.map { RecordID(recordName: $0, zoneID: z) }
        return r
    }

    /// Reads a record's `fields` object into `fields`, each decoded as ``FieldCoding/decode(value:type:at:schemaType:zone:lossless:)``
    /// does. With `throwing` false a field that does not decode is left out and the answer is true (the caller
    /// reads them again once it knows the record's zone); the object is read to its end either way.
    private static func readFields(
        _ p: inout JSONParser, into fields: inout [String: FieldValue], at path: @autoclosure () -> String, zone: ZoneID,
        lossless: Bool, throwing: Bool
    ) throws -> Bool {
        var failed = false
        try p.readObject { p, field in
            var value: JSONValue?, type: JSONValue?
            try p.readObject { p, key in
                switch key {
                case "value" where value == nil: value = try p.readValue()
                case "type" where type == nil: type = try p.readValue()
                case "value", "type": throw NotPlain()
                default: _ = try p.readValue()
                }
            }
            guard let value else { throw NotPlain() }
            do {
                fields[field] = try FieldCoding.decode(
                    value: value, type: type, at: [String: JSONValue].join(path(), "fields") + "." + field, schemaType: nil,
                    zone: zone, lossless: lossless)
            } catch let e as APIError {
                if throwing { throw e }
                failed = true
            }
        }
        return failed
    }

    /// A stamp `{timestamp, userRecordName, deviceID}` as the server writes it (anything else: ``NotPlain``).
    private static func readStamp(_ p: inout JSONParser) throws -> RecordStamp {
        var t: Int64?, user: String?, device: String?
        try p.readObject { p, key in
            switch key {
            case "timestamp" where t == nil:
                guard case .number(let n) = try p.readValue(), let v = n.int64 else { throw NotPlain() }
                t = v
            case "userRecordName" where user == nil: user = try p.readString()
            case "deviceID" where device == nil: device = try p.readString()
            default: throw NotPlain()
            }
        }
        guard let t, let user, let device else { throw NotPlain() }
        return RecordStamp(timestamp: t, userRecordName: user, deviceID: device)
    }

    /// The record name of a record dictionary's `parent: {recordName, …}`, if it has one (null: none).
    public static func parentName(_ o: [String: JSONValue], at path: String) throws -> String? {
        guard let p = o["parent"], p != .null else { return nil }
        let parent = try p.requireObject(at: [String: JSONValue].join(path, "parent"))
        guard let name = try parent.string("recordName", at: [String: JSONValue].join(path, "parent")), !name.isEmpty else {
            throw APIError.badRequest("\([String: JSONValue].join(path, "parent")).recordName is missing")
        }
        return name
    }

    private static func stamp(_ o: [String: JSONValue], _ key: String, at path: String) throws -> RecordStamp? {
        guard let s = try o.object(key, at: path) else { return nil }
        // A stamp as the server writes it is read without building the member's path (only errors need it).
        if case .number(let n)? = s["timestamp"], let t = n.int64, case .string(let user)? = s["userRecordName"],
            case .string(let device)? = s["deviceID"]
        {
            return RecordStamp(timestamp: t, userRecordName: user, deviceID: device)
        }
        let p = [String: JSONValue].join(path, key)
        guard let t = try s.int("timestamp", at: p) else { throw APIError.badRequest("\(p).timestamp is missing") }
        return RecordStamp(
            timestamp: t, userRecordName: try s.string("userRecordName", at: p) ?? "", deviceID: try s.string("deviceID", at: p) ?? "")
    }

    private static func writeStamp(_ key: String, _ s: RecordStamp, to w: inout JSONWriter) {
        w.key(key)
        w.object { w in
            w.member("timestamp", s.timestamp)
            w.member("userRecordName", s.userRecordName)
            w.member("deviceID", s.deviceID)
        }
    }

    /// Writes the result of deleting a record: `{recordName, deleted: true, zoneID}`.
    public static func writeDeleted(_ id: RecordID, to w: inout JSONWriter) {
        w.object { w in
            w.member("recordName", id.recordName)
            w.member("deleted", true)
            w.key("zoneID")
            ZoneIDCoding.write(id.zoneID, to: &w)
        }
    }

    /// Writes a per-record error: `{recordName, serverErrorCode, reason, uuid}`, plus `serverRecord` (the record as
    /// the server has it) for `CONFLICT` and `EXISTS`, so a client can merge and retry without another lookup.
    public static func writeError(
        _ e: CloudletError, recordName: String, to w: inout JSONWriter, numbersAsStrings: Bool, assetLinks: AssetLinks? = nil
    ) {
        w.object { w in
            w.member("recordName", recordName)
            APIError(e).writeMembers(to: &w)
            if let server = e.serverRecord {
                w.key("serverRecord")
                write(server, to: &w, desiredKeys: nil, numbersAsStrings: numbersAsStrings, assetLinks: assetLinks)
            }
        }
    }
}
