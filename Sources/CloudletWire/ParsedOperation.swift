import CloudletCore
import CloudletModel
import Foundation

/// One entry of a `records/modify` request's `operations`, checked for shape but with field values still JSON
/// (their types may depend on the schema, read once per request).
public struct ParsedOperation: Sendable {
    /// Web Services' `operationType`.
    public enum Kind: String, CaseIterable, Sendable {
        case create, update, forceUpdate, replace, forceReplace, delete, forceDelete

        public var isDelete: Bool { self == .delete || self == .forceDelete }
    }

    /// `operations[i]`, for error messages.
    public let path: String
    public let kind: Kind
    public let recordName: String
    public var recordType: String?
    public let changeTag: String?
    public let zone: ZoneID
    public let fields: [String: JSONValue]
    /// The operation's own `desiredKeys` (they override the request's).
    public let desiredKeys: [String]?
    /// The share members of a save of a share (a record of type `cloudkit.share`, also spelled `cloudKit.share`, or
    /// named `cloudkit.zoneshare`); nil for any other operation.
    public let share: ParsedShare?
    /// The name of the share a saved record names as its own (`share: {recordName, zoneID}`): the record is that
    /// share's root.
    public let shareName: String?
    /// The record's `parent: {recordName}` (a record of the same zone).
    public let parentName: String?

    /// Checks the shape of `operations[index]`. `zone` is the request's `zoneID` (a record's own `zoneID`, as in a
    /// record dictionary fetched earlier and sent back, takes precedence).
    public init(_ json: JSONValue, index: Int, zone requestZone: ZoneID) throws {
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
        if recordType?.lowercased() == Share.recordType { recordType = Share.recordType }
        share = !kind.isDelete && (recordType == Share.recordType || recordName == Share.zoneWideShareName)
            ? try ShareCoding.decode(record, operation: op, at: rpath) : nil
        shareName = try record.object("share", at: rpath).flatMap { try $0.string("recordName", at: rpath + ".share") }
        parentName = try RecordCoding.parentName(record, at: rpath)
        if kind == .create, recordType == nil {
            throw APIError.badRequest("\(rpath).recordType is missing (required to create a record)")
        }
    }

    public var recordID: RecordID { RecordID(recordName: recordName, zoneID: zone) }

    /// The engine operation, decoding field values with the schema's types (`fieldType(recordType, field)`) where
    /// the request gives none.
    public func operation(fieldType: (_ recordType: String, _ field: String) -> FieldType?) throws -> RecordOperation {
        let type = recordType ?? ""
        var values: [String: FieldValue] = [:]
        values.reserveCapacity(fields.count)
        for (name, json) in fields {
            let hint = json["type"] == nil ? fieldType(type, name) : nil
            values[name] = try FieldCoding.decode(json, at: "\(path).record.fields.\(name)", schemaType: hint, zone: zone)
        }
        var record = Record(recordType: type, id: recordID, fields: values)
        record.changeTag = changeTag
        record.parent = parentName.map { RecordID(recordName: $0, zoneID: zone) }
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

/// A `records/modify` request: `{operations: [{operationType, record, desiredKeys?}], zoneID?, atomic? (default
/// true), desiredKeys?, numbersAsStrings?}`, at most ``CloudletLimits/operationsPerRequest`` operations, each checked
/// for shape (field values are decoded later, with the schema: ``ParsedOperation/operation(fieldType:)``).
public struct ModifyRequest: Sendable {
    public var operations: [ParsedOperation]
    public var atomic: Bool
    public var desiredKeys: [String]?
    public var numbersAsStrings: Bool

    public init(_ body: [String: JSONValue]) throws {
        let items = try body.requiredList("operations", limit: CloudletLimits.operationsPerRequest, per: "request")
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        atomic = try body.bool("atomic", at: "") ?? true
        desiredKeys = try body.strings("desiredKeys", at: "")
        numbersAsStrings = try body.bool("numbersAsStrings", at: "") ?? false
        operations = try items.enumerated().map { i, item in try ParsedOperation(item, index: i, zone: zone) }
    }
}
