import CloudletCore
import CloudletModel

/// A `records/lookup` request: `{records: [{recordName, desiredKeys?, zoneID?}], zoneID?, desiredKeys?,
/// numbersAsStrings?}`, at most ``CloudletLimits/lookupsPerRequest`` records, each named once.
public struct LookupRequest: Sendable {
    public var recordIDs: [RecordID]
    /// Per record, the fields to return (its own `desiredKeys`, else the request's; nil: all).
    public var desiredKeys: [Set<String>?]
    public var numbersAsStrings: Bool

    /// - Throws: `BAD_REQUEST` naming the member: a missing name, too many records, a record listed twice.
    public init(_ body: [String: JSONValue]) throws {
        let items = try body.requiredList("records", limit: CloudletLimits.lookupsPerRequest, per: "lookup")
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        let requestKeys = try body.strings("desiredKeys", at: "")
        numbersAsStrings = try body.bool("numbersAsStrings", at: "") ?? false
        var keys: [Set<String>?] = []
        var seen: [RecordID: Int] = [:]
        recordIDs = try items.enumerated().map { i, item in
            let path = "records[\(i)]"
            let o = try item.requireObject(at: path)
            guard let name = try o.string("recordName", at: path), !name.isEmpty else {
                throw APIError.badRequest("\(path).recordName is missing")
            }
            keys.append((try o.strings("desiredKeys", at: path) ?? requestKeys).map(Set.init))
            let id = RecordID(recordName: name, zoneID: try ZoneIDCoding.decode(o["zoneID"], at: path + ".zoneID") ?? zone)
            if let first = seen.updateValue(i, forKey: id) {
                throw APIError.badRequest(
                    "records[\(i)] names record '\(id.recordName)' in zone '\(id.zoneID.zoneName)' again (as records[\(first)]); "
                        + "list each record once")
            }
            return id
        }
        desiredKeys = keys
    }
}
