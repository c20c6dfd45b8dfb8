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

    private func parsed() throws -> QueryRequest {
        var schema = SchemaHints(container: context.container, environment: context.path.environment)
        return try QueryRequest(context.body, fieldType: { schema.type(of: $1, in: $0) })
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
        let links = context.assetLinks
        let roots = db.rootShares(of: results.records)
        var w = JSONWriter(capacity: 256 * results.records.count + 64)
        w.object { w in
            w.key("records")
            w.array { w in
                for rec in results.records {
                    // The engine has applied desiredKeys already.
                    RecordCoding.write(
                        rec, to: &w, desiredKeys: nil, numbersAsStrings: r.numbersAsStrings, assetLinks: links, share: roots[rec.id],
                        viewer: context.shareViewer)
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
