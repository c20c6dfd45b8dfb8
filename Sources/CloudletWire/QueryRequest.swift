import CloudletCore
import CloudletModel

/// A `records/query` (or `records/count`, or explain) request: `{query: {recordType, filterBy?, sortBy?: [{fieldName,
/// ascending?, relativeLocation?}]}, zoneID?, zoneWide?, resultsLimit?, continuationMarker?, desiredKeys?,
/// numbersAsStrings?}`. Shape faults are `BAD_REQUEST` naming the member.
public struct QueryRequest: Sendable {
    public var query: Query
    public var zone: ZoneID
    public var zoneWide: Bool
    public var resultsLimit: Int?
    public var marker: QueryCursor?
    public var desiredKeys: [String]?
    public var numbersAsStrings: Bool

    /// Parses a request body; untyped filter values take their type from `fieldType(recordType, field)`.
    public init(_ body: [String: JSONValue], fieldType: (_ recordType: String, _ field: String) -> FieldType?) throws {
        guard let q = try body.object("query", at: "") else { throw APIError.badRequest("query is missing") }
        guard var recordType = try q.string("recordType", at: "query"), !recordType.isEmpty else {
            throw APIError.badRequest("query.recordType is missing")
        }
        // Web Services' examples spell the share type `cloudKit.share`.
        if recordType.lowercased() == Share.recordType { recordType = Share.recordType }
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        let predicate = try FilterCoding.decode(
            q["filterBy"], at: "query.filterBy", zone: zone, fieldType: { fieldType(recordType, $0) })
        var sorts: [QuerySort] = []
        for (i, item) in (try q.array("sortBy", at: "query") ?? []).enumerated() {
            let path = "query.sortBy[\(i)]"
            let o = try item.requireObject(at: path)
            guard let field = try o.string("fieldName", at: path), !field.isEmpty else {
                throw APIError.badRequest("\(path).fieldName is missing")
            }
            var location: Location?
            if let rel = o["relativeLocation"], rel != .null {
                // Either a field value `{value: {latitude, longitude}, type?}` or the bare location.
                let wrapped: JSONValue = rel["value"] != nil ? rel : .object(["value": rel])
                guard
                    case .location(let l) = try FieldCoding.decode(
                        wrapped, at: path + ".relativeLocation", schemaType: FieldType(.location), zone: zone)
                else { throw APIError.badRequest("\(path).relativeLocation must be a location") }
                location = l
            }
            sorts.append(QuerySort(field, ascending: try o.bool("ascending", at: path) ?? true, relativeLocation: location))
        }
        var limit: Int?
        if let n = try body.int("resultsLimit", at: "") {
            guard n >= 1 else { throw APIError.badRequest("resultsLimit must be at least 1, not \(n)") }
            limit = Int(min(n, Int64(CloudletLimits.queryResults)))
        }
        let marker = try body.string("continuationMarker", at: "")
        if let marker, marker.isEmpty { throw APIError.badRequest("continuationMarker is empty") }
        query = Query(recordType: recordType, predicate: predicate, sortDescriptors: sorts)
        self.zone = zone
        zoneWide = try body.bool("zoneWide", at: "") ?? false
        resultsLimit = limit
        self.marker = marker.map(QueryCursor.init(marker:))
        desiredKeys = try body.strings("desiredKeys", at: "")
        numbersAsStrings = try body.bool("numbersAsStrings", at: "") ?? false
    }
}
