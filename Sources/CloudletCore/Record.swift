/// Who changed a record, when, and from which device (CloudKit's `created` / `modified` dictionaries).
public struct RecordStamp: Sendable, Hashable {
    /// Milliseconds since 1970.
    public var timestamp: Int64
    public var userRecordName: String
    public var deviceID: String

    public init(timestamp: Int64, userRecordName: String, deviceID: String) {
        self.timestamp = timestamp
        self.userRecordName = userRecordName
        self.deviceID = deviceID
    }
}

/// A record: a type, an identity, typed fields and the system fields the server maintains.
///
/// Build one with a type and name, set fields by subscript, and save it; the server fills ``changeTag``,
/// ``created`` and ``modified``. To update, fetch the record (or keep the one `save` returned), change fields
/// and save again: the change tag it carries is checked against the server's.
public struct Record: Sendable, Hashable {
    public var id: RecordID
    /// The record type, fixed when the record is created.
    public var recordType: String
    /// The fields, by name.
    public var fields: [String: FieldValue]
    /// Changes on every save (CloudKit `recordChangeTag`); `nil` for a record never saved.
    public var changeTag: String?
    public var created: RecordStamp?
    public var modified: RecordStamp?
    /// The record's parent (CloudKit's `parent`), a record of the same zone: sharing a record shares the records
    /// whose parent chain leads to it. Only its name is stored.
    public var parent: RecordID?

    public init(recordType: String, id: RecordID, fields: [String: FieldValue] = [:]) {
        self.recordType = recordType
        self.id = id
        self.fields = fields
    }

    public init(recordType: String, recordName: String, zoneID: ZoneID = .default, fields: [String: FieldValue] = [:]) {
        self.init(recordType: recordType, id: RecordID(recordName: recordName, zoneID: zoneID), fields: fields)
    }

    public subscript(field: String) -> FieldValue? {
        get { fields[field] }
        set { fields[field] = newValue }
    }

    public var recordName: String { id.recordName }
}
