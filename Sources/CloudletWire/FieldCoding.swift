import CloudletCore
import CloudletModel
import Foundation

/// The `downloadURL` of an asset in a response (the server signs one per asset); nil writes none.
public typealias AssetLinks = (AssetReference) -> String?

/// Field values on the wire: `{"value": …, "type": "INT64"}` (Web Services field encoding, `reference/cloudkit.md`
/// §2.4).
///
/// Decoding takes the type from `type` when given, else from the schema (the field's type once a record of the
/// type was saved), else from the JSON value (string → STRING, integer → INT64, fraction → DOUBLE, object with
/// `recordName` → REFERENCE, with `latitude` → LOCATION, with `fileChecksum` → ASSETID, array → a list of those).
/// A value that does not fit its type is a `BAD_REQUEST` naming the field: nothing is guessed.
public enum FieldCoding {
    /// Decodes one field value at `path` (e.g. `operations[0].record.fields.age`). `schemaType` is the field's type
    /// in the schema, if known. References must point into `zone`.
    ///
    /// `lossless` reads back everything the encoder writes, for exports of stores the embedded API filled: DOUBLEs
    /// (and location members) written as `"NaN"`, `"Infinity"`, `"-Infinity"`, and coordinates outside ±90 / ±180.
    /// Requests from clients are decoded without it: such values are `BAD_REQUEST`.
    public static func decode(
        _ json: JSONValue, at lazyPath: @autoclosure () -> String, schemaType: FieldType?, zone: ZoneID, lossless: Bool = false
    ) throws -> FieldValue {
        // The path is only built for an error message (a record decodes many fields; most decode fine).
        var path: String { lazyPath() }
        let o: [String: JSONValue]
        if case .object(let members) = json { o = members } else { o = try json.requireObject(at: path) }
        guard let value = o["value"] else { throw APIError.badRequest("\(path).value is missing") }
        return try decode(value: value, type: o["type"], at: path, schemaType: schemaType, zone: zone, lossless: lossless)
    }

    /// Decodes a field from its two members, `value` and `type` (nil: absent), as ``decode(_:at:schemaType:zone:lossless:)``
    /// does the dictionary holding them (a streaming reader has them without the dictionary).
    public static func decode(
        value: JSONValue, type typeMember: JSONValue?, at lazyPath: @autoclosure () -> String, schemaType: FieldType?,
        zone: ZoneID, lossless: Bool = false
    ) throws -> FieldValue {
        var path: String { lazyPath() }
        if value == .null {
            throw APIError.badRequest(
                "\(path).value is null; to remove a field, save the record with replace or forceReplace without it")
        }
        let type: FieldType
        switch typeMember {
        case nil, .null?:
            if let schemaType { type = schemaType } else { type = try infer(value, at: path + ".value") }
        case .string("LIST")?:
            guard case .array(let items) = value else {
                throw APIError.badRequest("\(path).value must be an array for type LIST, not \(value.kindDescription)")
            }
            if let schemaType, schemaType.isList { type = schemaType } else { type = try infer(.array(items), at: path + ".value") }
        case .string(let name)?:
            guard let t = FieldType(cloudKitName: name) else {
                throw APIError.badRequest(
                    "\(path).type '\(name)' is not a CloudKit field type (STRING, INT64, DOUBLE, BYTES, TIMESTAMP, "
                        + "LOCATION, REFERENCE, ASSETID, or one of them with _LIST)")
            }
            type = t
        case let t?:
            throw APIError.badRequest("\(path).type must be a string, not \(t.kindDescription)")
        }
        if type.isList {
            guard case .array(let items) = value else {
                throw APIError.badRequest("\(path).value must be an array for type \(type), not \(value.kindDescription)")
            }
            var out: [FieldValue] = []
            out.reserveCapacity(items.count)
            for (i, item) in items.enumerated() {
                out.append(try scalar(item, type.scalar, at: "\(path).value[\(i)]", zone: zone, lossless: lossless))
            }
            return .list(type.scalar, out)
        }
        return try scalar(value, type.scalar, at: path + ".value", zone: zone, lossless: lossless)
    }

    // MARK: - Scalars

    private static func scalar(
        _ v: JSONValue, _ type: ScalarType, at lazyPath: @autoclosure () -> String, zone: ZoneID, lossless: Bool
    ) throws -> FieldValue {
        // The path is only built for an error message (a record decodes many fields; most decode fine).
        var path: String { lazyPath() }
        func mismatch(_ expected: String) -> APIError {
            APIError.badRequest("\(path) is \(v.kindDescription), which is not a valid \(type.cloudKitName) (\(expected))")
        }
        switch type {
        case .string:
            guard case .string(let s) = v else { throw mismatch("expected a string") }
            return .string(s)
        case .int64:
            switch v {
            case .number(let n):
                guard n.isInteger else { throw mismatch("expected an integer") }
                guard let i = n.int64 else { throw APIError.badRequest("\(path) \(n.text) is outside the INT64 range") }
                return .int64(i)
            case .string(let s):
                guard let i = Int64(s) else { throw mismatch("expected an integer or a string of one") }
                return .int64(i)
            case .bool(let b): return .int64(b ? 1 : 0)
            default: throw mismatch("expected an integer")
            }
        case .double:
            if lossless, let d = v.doubleValue { return .double(d) }
            switch v {
            case .number(let n):
                guard n.double.isFinite else { throw APIError.badRequest("\(path) \(n.text) is outside the DOUBLE range") }
                return .double(n.double)
            case .string(let s):
                guard let d = Double(s), d.isFinite else { throw mismatch("expected a number or a string of one") }
                return .double(d)
            default: throw mismatch("expected a number")
            }
        case .bytes:
            guard case .string(let s) = v else { throw mismatch("expected a base64 string") }
            guard let data = Base64.decode(s) else { throw APIError.badRequest("\(path) is not valid base64") }
            return .bytes(data)
        case .timestamp:
            return .timestamp(try milliseconds(v, at: path, mismatch: mismatch("expected milliseconds since 1970")))
        case .location:
            return .location(
                try location(v, at: path, mismatch: mismatch("expected {latitude, longitude, …}"), lossless: lossless))
        case .reference:
            return .reference(try reference(v, at: path, zone: zone, mismatch: mismatch("expected {recordName, action}")))
        case .asset:
            guard case .object(let o) = v else { throw mismatch("expected {fileChecksum, size, receipt?}") }
            guard let checksum = try o.string("fileChecksum", at: path), !checksum.isEmpty else {
                throw APIError.badRequest("\(path).fileChecksum is missing")
            }
            guard let size = try o.int("size", at: path), size >= 0 else {
                throw APIError.badRequest("\(path).size is missing or negative")
            }
            var asset = AssetReference(fileChecksum: checksum, size: size, receipt: try o.string("receipt", at: path))
            asset.downloadURL = try o.string("downloadURL", at: path)
            return .asset(asset)
        }
    }

    private static func milliseconds(
        _ v: JSONValue, at path: @autoclosure () -> String, mismatch: @autoclosure () -> APIError
    ) throws -> Int64 {
        switch v {
        case .number(let n):
            if let i = n.int64 { return i }
            let d = n.double.rounded()
            guard d.isFinite, d >= -9.2e18, d <= 9.2e18 else { throw APIError.badRequest("\(path()) \(n.text) is out of range") }
            return Int64(d)
        case .string(let s):
            guard let i = Int64(s) else { throw mismatch() }
            return i
        default: throw mismatch()
        }
    }

    private static func location(
        _ v: JSONValue, at path: String, mismatch: @autoclosure () -> APIError, lossless: Bool
    ) throws -> Location {
        guard case .object(let o) = v else { throw mismatch() }
        func number(_ key: String) throws -> Double? {
            if lossless, let x = o[key], x != .null {
                guard let d = x.doubleValue else { throw APIError.badRequest("\(path).\(key) must be a number") }
                return d
            }
            return try o.double(key, at: path)
        }
        guard let lat = try number("latitude"), let lon = try number("longitude") else {
            throw APIError.badRequest("\(path) needs latitude and longitude")
        }
        guard lossless || ((-90...90).contains(lat) && (-180...180).contains(lon)) else {
            throw APIError.badRequest("\(path): latitude \(lat) / longitude \(lon) is outside ±90 / ±180 degrees")
        }
        return Location(
            latitude: lat, longitude: lon, horizontalAccuracy: try number("horizontalAccuracy"),
            verticalAccuracy: try number("verticalAccuracy"), altitude: try number("altitude"), speed: try number("speed"),
            course: try number("course"),
            timestamp: try o["timestamp"].flatMap { $0 == .null ? nil : try milliseconds($0, at: path + ".timestamp", mismatch: mismatch()) })
    }

    private static func reference(
        _ v: JSONValue, at path: String, zone: ZoneID, mismatch: @autoclosure () -> APIError
    ) throws -> Reference {
        guard case .object(let o) = v else { throw mismatch() }
        guard let name = try o.string("recordName", at: path), !name.isEmpty else {
            throw APIError.badRequest("\(path).recordName is missing")
        }
        let action: Reference.Action
        switch try o.string("action", at: path) {
        case nil, "NONE": action = .none
        case "DELETE_SELF": action = .deleteSelf
        case "VALIDATE": action = .validate
        case let other?:
            throw APIError.badRequest("\(path).action '\(other)' is not NONE, DELETE_SELF or VALIDATE")
        }
        if let target = try ZoneIDCoding.decode(o["zoneID"], at: path + ".zoneID"), target.zoneName != zone.zoneName {
            throw APIError.badRequest(
                "\(path) points into zone '\(target.zoneName)'; references must stay in the record's zone '\(zone.zoneName)'")
        }
        return Reference(recordName: name, action: action)
    }

    // MARK: - Inference

    /// The type of an untyped value with no schema to go by.
    private static func infer(_ v: JSONValue, at lazyPath: @autoclosure () -> String) throws -> FieldType {
        var path: String { lazyPath() }
        if case .array(let items) = v {
            guard !items.isEmpty else {
                throw APIError.badRequest("\(path) is an empty list without a type; give \"type\" (e.g. STRING_LIST)")
            }
            var scalar: ScalarType?
            for (i, item) in items.enumerated() {
                if case .array = item { throw APIError.badRequest("\(path)[\(i)]: a list cannot contain a list") }
                let t = try inferScalar(item, at: "\(path)[\(i)]")
                switch (scalar, t) {
                case (nil, _): scalar = t
                case (let s?, _) where s == t: break
                case (.int64?, .double), (.double?, .int64): scalar = .double
                case (let s?, _):
                    throw APIError.badRequest(
                        "\(path) mixes \(s.cloudKitName) and \(t.cloudKitName) items; a list holds one type")
                }
            }
            return FieldType(scalar!, list: true)
        }
        return FieldType(try inferScalar(v, at: path))
    }

    private static func inferScalar(_ v: JSONValue, at path: @autoclosure () -> String) throws -> ScalarType {
        switch v {
        case .string: return .string
        case .number(let n): return n.isInteger ? .int64 : .double
        case .bool: return .int64
        case .object(let o) where o["recordName"] != nil: return .reference
        case .object(let o) where o["latitude"] != nil || o["longitude"] != nil: return .location
        case .object(let o) where o["fileChecksum"] != nil || o["receipt"] != nil: return .asset
        default:
            throw APIError.badRequest("\(path()): cannot tell the type of \(v.kindDescription); give \"type\"")
        }
    }

    // MARK: - Encoding

    /// Writes `{"value": …, "type": …}`. `numbersAsStrings` writes INT64 and DOUBLE values as strings; an asset gets
    /// the `downloadURL` that `assetLinks` gives it.
    public static func write(
        _ v: FieldValue, to w: inout JSONWriter, numbersAsStrings: Bool, zone: ZoneID, assetLinks: AssetLinks? = nil
    ) {
        w.object { w in
            w.key("value")
            writeValue(v, to: &w, numbersAsStrings: numbersAsStrings, zone: zone, assetLinks: assetLinks)
            w.member("type", typeTag(v.type))
        }
    }

    /// The type tag written for `type`: its CloudKit name, except that a list of assets is `ASSET_LIST` (there is
    /// no `ASSETID_LIST`).
    public static func typeTag(_ type: FieldType) -> String {
        type == FieldType(.asset, list: true) ? "ASSET_LIST" : type.description
    }

    /// Writes a field's value alone (what ``write(_:to:numbersAsStrings:zone:)`` puts under `value`).
    public static func writeValue(
        _ v: FieldValue, to w: inout JSONWriter, numbersAsStrings: Bool, zone: ZoneID, assetLinks: AssetLinks? = nil
    ) {
        switch v {
        case .string(let s): w.string(s)
        case .int64(let i): if numbersAsStrings { w.string(String(i)) } else { w.int(i) }
        case .double(let d): if numbersAsStrings { w.string(d.description) } else { w.double(d) }
        case .bytes(let b): w.string(Base64.encode(b))
        case .timestamp(let t): w.int(t)
        case .location(let l):
            w.object { w in
                w.key("latitude")
                w.double(l.latitude)
                w.key("longitude")
                w.double(l.longitude)
                for (k, x) in [
                    ("horizontalAccuracy", l.horizontalAccuracy), ("verticalAccuracy", l.verticalAccuracy),
                    ("altitude", l.altitude), ("speed", l.speed), ("course", l.course),
                ] {
                    if let x {
                        w.key(k)
                        w.double(x)
                    }
                }
                if let t = l.timestamp { w.member("timestamp", t) }
            }
        case .reference(let r):
            w.object { w in
                w.member("recordName", r.recordName)
                w.member("action", r.action.cloudKitName)
                w.key("zoneID")
                ZoneIDCoding.write(zone, to: &w)
            }
        case .asset(let a):
            w.object { w in
                w.member("fileChecksum", a.fileChecksum)
                w.member("size", a.size)
                if let r = a.receipt { w.member("receipt", r) }
                if let url = assetLinks?(a) { w.member("downloadURL", url) }
            }
        case .list(_, let items):
            w.array { w in
                for item in items {
                    writeValue(item, to: &w, numbersAsStrings: numbersAsStrings, zone: zone, assetLinks: assetLinks)
                }
            }
        }
    }
}
