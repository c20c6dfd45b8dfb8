import CloudletCore
import CloudletModel

/// Record dictionaries on the wire: `{recordName, recordType, recordChangeTag, fields, created, modified, deleted,
/// zoneID}`, and the per-record error dictionaries that stand in for a record in `records/modify` and
/// `records/lookup` responses.
public enum RecordCoding {
    /// Writes a record. `desiredKeys` limits the fields written (nil: all; empty: none).
    public static func write(_ r: Record, to w: inout JSONWriter, desiredKeys: Set<String>?, numbersAsStrings: Bool) {
        w.object { w in
            w.member("recordName", r.recordName)
            w.member("recordType", r.recordType)
            if let tag = r.changeTag { w.member("recordChangeTag", tag) }
            w.key("fields")
            w.object { w in
                for name in r.fields.keys.sorted() where desiredKeys?.contains(name) ?? true {
                    w.key(name)
                    FieldCoding.write(r.fields[name]!, to: &w, numbersAsStrings: numbersAsStrings, zone: r.id.zoneID)
                }
            }
            if let c = r.created { writeStamp("created", c, to: &w) }
            if let m = r.modified { writeStamp("modified", m, to: &w) }
            w.member("deleted", false)
            w.key("zoneID")
            ZoneIDCoding.write(r.id.zoneID, to: &w)
        }
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
    public static func writeError(_ e: CloudletError, recordName: String, to w: inout JSONWriter, numbersAsStrings: Bool) {
        w.object { w in
            w.member("recordName", recordName)
            APIError(e).writeMembers(to: &w)
            if let server = e.serverRecord {
                w.key("serverRecord")
                write(server, to: &w, desiredKeys: nil, numbersAsStrings: numbersAsStrings)
            }
        }
    }
}
