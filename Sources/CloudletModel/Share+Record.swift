import CloudletCore

/// A share as the record it is stored as: a record of type `cloudkit.share` in its owner's zone, named like the share,
/// whose change tag is the share's and whose one field, ``Share/recordField`` (BYTES), holds the rest of the share
/// (docs/record-format.md, "Share records"). This is what a zone's change feed carries for a share.
extension Share {
    /// The field of a share record that holds the share (BYTES, ``encodeBody(into:)``).
    public static let recordField = "share"

    /// The share as a record of its zone, with change tag `changeTag` and the given stamps.
    public func record(changeTag: String, created: RecordStamp?, modified: RecordStamp?) -> Record {
        var w = ByteWriter(capacity: 64 + 32 * participants.count)
        var body = self
        body.changeTag = nil
        body.encodeBody(into: &w)
        var r = Record(recordType: Self.recordType, id: id, fields: [Self.recordField: .bytes(w.bytes)])
        r.changeTag = changeTag
        r.created = created
        r.modified = modified
        return r
    }

    /// The share a `cloudkit.share` record holds (its change tag the record's; its owner the zone's).
    /// - Throws: `invalidArguments` for a record of another type; `corruption` for a malformed share field.
    public init(record: Record) throws {
        guard record.recordType == Self.recordType, case .bytes(let bytes)? = record.fields[Self.recordField] else {
            throw CloudletError.invalid("record '\(record.recordName)' is not a share (a '\(Self.recordType)' record with a '\(Self.recordField)' field)")
        }
        var r = ByteReader(bytes, what: "share record '\(record.recordName)'")
        self = try Self.decodeBody(&r, zoneID: record.id.zoneID)
        guard id.recordName == record.recordName else {
            throw CloudletError.corruption("share record '\(record.recordName)' holds share '\(id.recordName)'")
        }
        changeTag = record.changeTag
    }

    /// `record name string · root string (empty: zone-wide) · public permission u8 · short GUID string (empty: none)
    /// · change tag string (empty: none) · participant count varint · (user string · email string (empty: none) ·
    /// type u8 · permission u8 · acceptance u8)…` — enums as their index in `allCases`. The zone and owner are the
    /// zone's. (The catalog's share mutations and checkpoints use the same body.)
    public func encodeBody(into w: inout ByteWriter) {
        w.string(id.recordName)
        w.string(rootRecordName ?? "")
        w.u8(Self.index(publicPermission))
        w.string(shortGUID ?? "")
        w.string(changeTag ?? "")
        w.varint(participants.count)
        for p in participants {
            w.string(p.userRecordName)
            w.string(p.emailAddress ?? "")
            w.u8(Self.index(p.type))
            w.u8(Self.index(p.permission))
            w.u8(Self.index(p.acceptance))
        }
    }

    /// Reads ``encodeBody(into:)`` of a share of zone `zoneID`.
    public static func decodeBody(_ r: inout ByteReader, zoneID: ZoneID) throws -> Share {
        let name = try r.string()
        let root = try r.string()
        var s = root.isEmpty ? Share(zone: zoneID) : Share(root: RecordID(recordName: root, zoneID: zoneID))
        s.id.recordName = name
        s.publicPermission = try value(&r)
        let guid = try r.string()
        s.shortGUID = guid.isEmpty ? nil : guid
        let tag = try r.string()
        s.changeTag = tag.isEmpty ? nil : tag
        for _ in 0..<(try r.length()) {
            let user = try r.string()
            let email = try r.string()
            s.participants.append(
                Share.Participant(
                    userRecordName: user, emailAddress: email.isEmpty ? nil : email, type: try value(&r), permission: try value(&r),
                    acceptance: try value(&r)))
        }
        return s
    }

    private static func index<E: CaseIterable & Equatable>(_ e: E) -> UInt8 where E.AllCases == [E] {
        UInt8(E.allCases.firstIndex(of: e)!)
    }

    private static func value<E: CaseIterable>(_ r: inout ByteReader) throws -> E where E.AllCases == [E] {
        let i = Int(try r.u8())
        guard i < E.allCases.count else { throw CloudletError.corruption("share: bad \(E.self) \(i)") }
        return E.allCases[i]
    }
}
