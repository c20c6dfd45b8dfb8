import CloudletCore

/// Records and field values as JSON, in the shape of CloudKit Web Services (`{"value": …, "type": "STRING"}`),
/// exact for every field type: INT64 as an integer, DOUBLE as the shortest text that reads back to the same value
/// (`"NaN"`, `"Infinity"`, `"-Infinity"` as strings), BYTES as base64, TIMESTAMP as milliseconds.
@_spi(Maintenance) public enum RecordJSON {
    /// `{"type": "STRING", "value": "…"}`.
    public static func encode(_ value: FieldValue) -> JSONValue {
        .object([("type", .string(value.type.description)), ("value", body(value))])
    }

    static func body(_ value: FieldValue) -> JSONValue {
        switch value {
        case .string(let s): .string(s)
        case .int64(let v): .int(v)
        case .double(let d): .double(d)
        case .bytes(let b): .string(Base64.encode(b))
        case .timestamp(let ms): .int(ms)
        case .location(let l):
            .object([
                "latitude": .double(l.latitude), "longitude": .double(l.longitude),
                "horizontalAccuracy": l.horizontalAccuracy.map(JSONValue.double),
                "verticalAccuracy": l.verticalAccuracy.map(JSONValue.double), "altitude": l.altitude.map(JSONValue.double),
                "speed": l.speed.map(JSONValue.double), "course": l.course.map(JSONValue.double),
                "timestamp": l.timestamp.map { JSONValue.int($0) },
            ])
        case .reference(let r): .object([("recordName", .string(r.recordName)), ("action", .string(r.action.cloudKitName))])
        case .asset(let a):
            .object([
                "fileChecksum": .string(a.fileChecksum), "size": .int(a.size), "receipt": a.receipt.map(JSONValue.string),
            ])
        case .list(_, let items): .array(items.map(body))
        }
    }

    /// A field value from `{"type": …, "value": …}`; the error names `field`.
    public static func decode(_ json: JSONValue, field: String) throws -> FieldValue {
        guard let tag = json["type"]?.stringValue, let type = FieldType(cloudKitName: tag) else {
            throw CloudletError.invalid("field '\(field)': missing or unknown \"type\"")
        }
        guard let v = json["value"] else { throw CloudletError.invalid("field '\(field)': missing \"value\"") }
        if type.isList {
            guard let items = v.arrayValue else { throw CloudletError.invalid("field '\(field)': a \(tag) needs an array") }
            return .list(type.scalar, try items.map { try scalar($0, type.scalar, field: field) })
        }
        return try scalar(v, type.scalar, field: field)
    }

    static func scalar(_ v: JSONValue, _ type: ScalarType, field: String) throws -> FieldValue {
        func bad() -> CloudletError { CloudletError.invalid("field '\(field)': \(v.serialized()) is not a valid \(type.cloudKitName)") }
        switch type {
        case .string: guard let s = v.stringValue else { throw bad() }; return .string(s)
        case .int64: guard let n = v.int64Value else { throw bad() }; return .int64(n)
        case .double: guard let d = v.doubleValue else { throw bad() }; return .double(d)
        case .bytes: guard let s = v.stringValue, let b = Base64.decode(s) else { throw bad() }; return .bytes(b)
        case .timestamp: guard let n = v.int64Value else { throw bad() }; return .timestamp(n)
        case .location:
            guard let lat = v["latitude"]?.doubleValue, let lon = v["longitude"]?.doubleValue else { throw bad() }
            return .location(
                Location(
                    latitude: lat, longitude: lon, horizontalAccuracy: v["horizontalAccuracy"]?.doubleValue,
                    verticalAccuracy: v["verticalAccuracy"]?.doubleValue, altitude: v["altitude"]?.doubleValue,
                    speed: v["speed"]?.doubleValue, course: v["course"]?.doubleValue,
                    timestamp: v["timestamp"]?.int64Value))
        case .reference:
            guard let name = v["recordName"]?.stringValue else { throw bad() }
            let actionName = v["action"]?.stringValue ?? "NONE"
            guard let action = Reference.Action.allCases.first(where: { $0.cloudKitName == actionName }) else { throw bad() }
            return .reference(Reference(recordName: name, action: action))
        case .asset:
            guard let sum = v["fileChecksum"]?.stringValue, let size = v["size"]?.int64Value else { throw bad() }
            return .asset(AssetReference(fileChecksum: sum, size: size, receipt: v["receipt"]?.stringValue))
        }
    }

    static func stamp(_ s: RecordStamp?) -> JSONValue? {
        s.map {
            .object([
                ("timestamp", .int($0.timestamp)), ("userRecordName", .string($0.userRecordName)),
                ("deviceID", .string($0.deviceID)),
            ])
        }
    }

    static func stamp(_ j: JSONValue?) throws -> RecordStamp? {
        guard let j, j != .null else { return nil }
        guard let t = j["timestamp"]?.int64Value else { throw CloudletError.invalid("a stamp needs a \"timestamp\"") }
        return RecordStamp(
            timestamp: t, userRecordName: j["userRecordName"]?.stringValue ?? "", deviceID: j["deviceID"]?.stringValue ?? "")
    }

    /// The members naming a database and zone.
    public static func location(_ zone: ZoneKey) -> [(String, JSONValue)] {
        [
            ("container", .string(zone.database.container)), ("environment", .string(zone.database.environment.rawValue)),
            ("scope", .string(zone.database.scope.rawValue)), ("owner", .string(zone.database.owner)),
            ("zone", .string(zone.zoneName)),
        ]
    }

    /// The zone named by the members of an export line.
    public static func zone(_ j: JSONValue) throws -> ZoneKey {
        guard let container = j["container"]?.stringValue, let zone = j["zone"]?.stringValue else {
            throw CloudletError.invalid("a line needs \"container\" and \"zone\"")
        }
        let environment = Environment(rawValue: j["environment"]?.stringValue ?? "development")
        let scope = DatabaseScope(rawValue: j["scope"]?.stringValue ?? "private")
        guard let environment, let scope else { throw CloudletError.invalid("unknown \"environment\" or \"scope\"") }
        let owner = j["owner"]?.stringValue ?? defaultOwnerName
        return ZoneKey(database: DatabaseID(container: container, environment: environment, scope: scope, owner: owner), zoneName: zone)
    }

    /// A record as an export line: `{"kind":"record", container…zone, recordName, recordType, changeTag, created,
    /// modified, fields}`.
    public static func line(_ record: Record, zone: ZoneKey, extra: [(String, JSONValue)] = []) -> JSONValue {
        var members: [(String, JSONValue)] = [("kind", .string("record"))] + location(zone) + extra
        members.append(("recordName", .string(record.recordName)))
        members.append(("recordType", .string(record.recordType)))
        if let tag = record.changeTag { members.append(("changeTag", .string(tag))) }
        if let c = stamp(record.created) { members.append(("created", c)) }
        if let m = stamp(record.modified) { members.append(("modified", m)) }
        members.append(("fields", .object(record.fields.sorted { $0.key < $1.key }.map { ($0.key, encode($0.value)) })))
        return .object(members)
    }

    /// The record of an export line (its zone: ``zone(_:)``).
    public static func record(_ j: JSONValue) throws -> Record {
        guard let name = j["recordName"]?.stringValue, let type = j["recordType"]?.stringValue else {
            throw CloudletError.invalid("a record line needs \"recordName\" and \"recordType\"")
        }
        var r = Record(recordType: type, recordName: name)
        if case .object(let fields) = j["fields"] ?? .object([]) {
            for (k, v) in fields { r.fields[k] = try decode(v, field: k) }
        } else {
            throw CloudletError.invalid("record '\(name)': \"fields\" must be an object")
        }
        r.changeTag = j["changeTag"]?.stringValue
        r.created = try stamp(j["created"])
        r.modified = try stamp(j["modified"])
        return r
    }
}
