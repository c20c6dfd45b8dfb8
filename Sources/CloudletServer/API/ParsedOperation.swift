import CloudletWire
import Cloudlet
import Foundation

/// One entry of a `records/modify` request's `operations`, checked for shape but with field values still JSON
/// (their types may depend on the schema, read once per request).
struct ParsedOperation: Sendable {
    /// Web Services' `operationType`.
    enum Kind: String, CaseIterable, Sendable {
        case create, update, forceUpdate, replace, forceReplace, delete, forceDelete

        var isDelete: Bool { self == .delete || self == .forceDelete }
    }

    /// `operations[i]`, for error messages.
    let path: String
    let kind: Kind
    let recordName: String
    var recordType: String?
    let changeTag: String?
    let zone: ZoneID
    let fields: [String: JSONValue]
    /// The operation's own `desiredKeys` (they override the request's).
    let desiredKeys: [String]?

    /// Checks the shape of `operations[index]`. `zone` is the request's `zoneID` (a record's own `zoneID`, as in a
    /// record dictionary fetched earlier and sent back, takes precedence).
    init(_ json: JSONValue, index: Int, zone requestZone: ZoneID) throws {
        path = "operations[\(index)]"
        let op = try json.requireObject(at: path)
        guard let type = try op.string("operationType", at: path) else {
            throw APIError.badRequest("\(path).operationType is missing")
        }
        guard let kind = Kind(rawValue: type) else {
            throw APIError.badRequest(
                "\(path).operationType '\(type)' is not one of \(Kind.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.kind = kind
        guard let record = try op.object("record", at: path) else { throw APIError.badRequest("\(path).record is missing") }
        let rpath = path + ".record"
        switch try record.string("recordName", at: rpath) {
        case let name? where !name.isEmpty: recordName = name
        case _ where kind == .create: recordName = UUID().uuidString  // CloudKit names unnamed new records
        default: throw APIError.badRequest("\(rpath).recordName is missing (required for \(kind.rawValue))")
        }
        recordType = try record.string("recordType", at: rpath)
        changeTag = try record.string("recordChangeTag", at: rpath)
        zone = try ZoneIDCoding.decode(record["zoneID"], at: rpath + ".zoneID") ?? requestZone
        fields = kind.isDelete ? [:] : (try record.object("fields", at: rpath) ?? [:])
        desiredKeys = try op.strings("desiredKeys", at: path)
        if kind == .create, recordType == nil {
            throw APIError.badRequest("\(rpath).recordType is missing (required to create a record)")
        }
    }

    var recordID: RecordID { RecordID(recordName: recordName, zoneID: zone) }

    /// The engine operation, decoding field values with the schema's types where the request gives none.
    func operation(schema: inout SchemaHints) throws -> RecordOperation {
        let type = recordType ?? ""
        var values: [String: FieldValue] = [:]
        values.reserveCapacity(fields.count)
        for (name, json) in fields {
            let hint = json["type"] == nil ? schema.type(of: name, in: type) : nil
            values[name] = try FieldCoding.decode(json, at: "\(path).record.fields.\(name)", schemaType: hint, zone: zone)
        }
        var record = Record(recordType: type, id: recordID, fields: values)
        record.changeTag = changeTag
        switch kind {
        case .create: return .create(record)
        case .update: return .update(record)
        case .forceUpdate: return .forceUpdate(record)
        case .replace: return .replace(record)
        case .forceReplace: return .forceReplace(record)
        // An empty tag makes the engine answer BAD_REQUEST "delete needs its recordChangeTag" for that record.
        case .delete: return .delete(recordID, changeTag: changeTag ?? "")
        case .forceDelete: return .forceDelete(recordID)
        }
    }
}
