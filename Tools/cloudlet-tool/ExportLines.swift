import Cloudlet
import CloudletMaintenance
import CloudletWire

/// The JSON lines of `export`, `dump --json` and `changes --json`: a record is CloudKit's record dictionary
/// (``RecordCoding``, the same the server sends) with the members that name its place in the store around it.
enum ExportLines {
    /// The members naming a database and zone: `container`, `environment`, `scope`, `owner`, `zone`.
    static func location(_ zone: ZoneKey) -> [(String, JSONValue?)] {
        [
            ("container", .string(zone.container)), ("environment", .string(zone.environment.rawValue)),
            ("scope", .string(zone.ownerDatabase.scope.rawValue)), ("owner", .string(zone.owner)),
            ("zone", .string(zone.zoneName)),
        ]
    }

    /// The zone named by the members of a line.
    static func zone(_ j: JSONValue) throws -> ZoneKey {
        guard let container = j["container"]?.stringValue, let zone = j["zone"]?.stringValue else {
            throw CloudletError.invalid("a line needs \"container\" and \"zone\"")
        }
        let environment = Environment(rawValue: j["environment"]?.stringValue ?? "development")
        let scope = DatabaseScope(rawValue: j["scope"]?.stringValue ?? "private")
        guard let environment, let scope else { throw CloudletError.invalid("unknown \"environment\" or \"scope\"") }
        let owner = j["owner"]?.stringValue ?? defaultOwnerName
        return ZoneKey(database: DatabaseID(container: container, environment: environment, scope: scope, owner: owner), zoneName: zone)
    }

    /// A record as one line: `{"kind": "record", container…zone, <extra>, recordName, recordType, recordChangeTag,
    /// fields, created, modified, deleted, zoneID}`.
    static func record(_ record: Record, zone: ZoneKey, kind: String = "record", extra: [(String, JSONValue?)] = []) -> String {
        var w = JSONWriter(capacity: 256)
        w.object { w in
            w.member("kind", kind)
            for (k, v) in location(zone) + extra {
                guard let v else { continue }
                w.key(k)
                w.value(v)
            }
            RecordCoding.writeMembers(record, to: &w, desiredKeys: nil, numbersAsStrings: false)
        }
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// The record of a line (its zone: ``zone(_:)``), every value read back exactly.
    static func record(_ j: JSONValue, zone: ZoneKey) throws -> Record {
        guard case .object(let o) = j else { throw CloudletError.invalid("a record line must be an object") }
        do {
            var r = try RecordCoding.decode(o, at: "", zone: zone.zoneID, lossless: true)
            r.id = RecordID(recordName: r.recordName, zoneID: zone.zoneID)
            return r
        } catch let e as APIError {
            // `fields.f.value is …`: say which field first, as the other tools do.
            if e.reason.hasPrefix("fields."), let name = e.reason.dropFirst(7).split(separator: ".").first {
                throw CloudletError.invalid("field '\(name)': \(e.reason)")
            }
            throw CloudletError.invalid(e.reason)
        }
    }

    /// A field's value as JSON text (`dump`'s text output).
    static func valueText(_ v: FieldValue) -> String {
        var w = JSONWriter(capacity: 32)
        FieldCoding.writeValue(v, to: &w, numbersAsStrings: false, zone: .default)
        return String(decoding: w.bytes, as: UTF8.self)
    }
}
