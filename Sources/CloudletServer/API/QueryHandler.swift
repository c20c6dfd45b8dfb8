import CloudletConcurrency
import CloudletWire
import Cloudlet

/// `records/query` (CloudKit), `records/count` (Cloudlet) and the body of `/cloudlet/admin/query/explain`.
///
/// Request: `{query: {recordType, filterBy?, sortBy?: [{fieldName, ascending?, relativeLocation?}]}, zoneID?,
/// zoneWide?, resultsLimit?, continuationMarker?, desiredKeys?, numbersAsStrings?}`; response `{records: [...],
/// continuationMarker?}`. `filterBy` as ``FilterCoding``. Shape faults are `BAD_REQUEST` naming the member; what
/// the schema decides (a production field without its index) is the engine's `BAD_REQUEST`, naming the field.
struct QueryHandler {
    let context: RequestContext

    /// A parsed query request.
    struct Request {
        var query: Query
        var zone: ZoneID
        var zoneWide: Bool
        var resultsLimit: Int?
        var marker: QueryCursor?
        var desiredKeys: [String]?
        var numbersAsStrings: Bool
    }

    static func parse(_ body: [String: JSONValue], schema: inout SchemaHints) throws -> Request {
        guard let q = try body.object("query", at: "") else { throw APIError.badRequest("query is missing") }
        guard let recordType = try q.string("recordType", at: "query"), !recordType.isEmpty else {
            throw APIError.badRequest("query.recordType is missing")
        }
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        let predicate = try FilterCoding.decode(
            q["filterBy"], at: "query.filterBy", zone: zone, fieldType: { schema.type(of: $0, in: recordType) })
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
            limit = Int(min(n, Int64(Database.maxQueryResults)))
        }
        let marker = try body.string("continuationMarker", at: "")
        if let marker, marker.isEmpty { throw APIError.badRequest("continuationMarker is empty") }
        return Request(
            query: Query(recordType: recordType, predicate: predicate, sortDescriptors: sorts), zone: zone,
            zoneWide: try body.bool("zoneWide", at: "") ?? false, resultsLimit: limit,
            marker: marker.map(QueryCursor.init(marker:)), desiredKeys: try body.strings("desiredKeys", at: ""),
            numbersAsStrings: try body.bool("numbersAsStrings", at: "") ?? false)
    }

    private func parsed() throws -> Request {
        var schema = SchemaHints(container: context.container, environment: context.path.environment)
        return try Self.parse(context.body, schema: &schema)
    }

    func query() throws -> [UInt8] {
        let r = try parsed()
        let db = context.database
        let budget = context.responseBudget
        let results: QueryResults
        do {
            results = try ThreadBridge.wait {
                try await db.query(
                    r.query, zoneID: r.zone, zoneWide: r.zoneWide, resultsLimit: r.resultsLimit,
                    desiredKeys: r.desiredKeys, continuationMarker: r.marker, maxBytes: budget)
            }
        } catch let e as CloudletError where r.marker != nil && e.message.contains("continuation marker") {
            throw APIError.badRequest("continuationMarker: \(e.message)")
        }
        var w = JSONWriter(capacity: 256 * results.records.count + 64)
        w.object { w in
            w.key("records")
            w.array { w in
                for rec in results.records {
                    // The engine has applied desiredKeys already.
                    RecordCoding.write(rec, to: &w, desiredKeys: nil, numbersAsStrings: r.numbersAsStrings)
                }
            }
            if let c = results.cursor { w.member("continuationMarker", c.marker) }
        }
        return w.bytes
    }

    /// `records/count`: same body as `records/query` (sorting, paging and keys are ignored) → `{"count": n}`.
    func count() throws -> [UInt8] {
        let r = try parsed()
        let db = context.database
        let n = try ThreadBridge.wait { try await db.count(r.query, zoneID: r.zone, zoneWide: r.zoneWide) }
        var w = JSONWriter()
        w.object { w in w.member("count", Int64(n)) }
        return w.bytes
    }

    /// `query/explain`: how the query would run, without running it or changing the schema.
    func explain() throws -> [UInt8] {
        let r = try parsed()
        let db = context.database
        let plan = try ThreadBridge.wait {
            try await db.explain(r.query, zoneID: r.zone, zoneWide: r.zoneWide, resultsLimit: r.resultsLimit)
        }
        var w = JSONWriter()
        QueryPlanCoding.write(plan, to: &w)
        return w.bytes
    }
}
