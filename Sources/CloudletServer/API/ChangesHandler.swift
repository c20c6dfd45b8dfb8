import CloudletConcurrency
import CloudletWire
import Cloudlet
import Foundation

/// Change feeds: `changes/zone` (several zones per request), the older `records/changes` (one zone),
/// `changes/database` and the older `zones/changes`.
///
/// Sync tokens are the engine's opaque change tokens in base64. A token of another store, zone or database is
/// `BAD_REQUEST`; one older than the tombstone retention window is `CHANGE_TOKEN_EXPIRED` (the client fetches
/// from scratch). Deleted records come back as `{recordName, recordType, deleted: true, zoneID}`.
struct ChangesHandler {
    static let maxZones = CloudletLimits.zonesPerRequest

    let context: RequestContext

    /// `changes/zone`: `{zones: [{zoneID, syncToken?, desiredKeys?, desiredRecordTypes?, resultsLimit?}], resultsLimit?}`
    /// → `{zones: [{zoneID, syncToken, moreComing, records}]}`, with a per-zone error object for a zone that failed.
    func zone() throws -> [UInt8] {
        let body = context.body
        guard let items = try body.array("zones", at: "") else { throw APIError.badRequest("zones is missing") }
        guard items.count <= Self.maxZones else {
            throw APIError.badRequest("\(items.count) zones in one request; the limit is \(Self.maxZones)")
        }
        let defaultLimit = try body.int("resultsLimit", at: "")
        let requests = try items.enumerated().map { i, item in
            try ZoneChangesRequest(item, at: "zones[\(i)]", defaultLimit: defaultLimit)
        }
        var seen: [ZoneID: Int] = [:]
        for (i, r) in requests.enumerated() {
            if let first = seen.updateValue(i, forKey: r.zoneID) {
                throw APIError.badRequest(
                    "zones[\(i)] names zone '\(r.zoneID.zoneName)' again (as zones[\(first)]); list each zone once")
            }
        }
        let db = context.database
        let budget = context.responseBudget
        // One budget for the whole response: once a zone's page has used it up, later zones report only whether
        // changes are waiting (no records, `moreComing`, their token unchanged).
        let results = try ThreadBridge.wait { () async throws -> [Result<ZoneChanges, CloudletError>] in
            var left = budget
            return try await perItemResults(requests) { r in
                let page = try await r.fetch(db, maxBytes: left)
                left = max(0, left - page.byteCount)
                return page
            }
        }
        var w = JSONWriter()
        w.object { w in
            w.key("zones")
            w.array { w in
                for (r, result) in zip(requests, results) {
                    switch result {
                    case .success(let changes):
                        ChangesCoding.write(
                            changes, zone: r.zoneID, owner: db.id.owner, to: &w, assetLinks: context.assetLinks,
                            viewer: context.shareViewer)
                    case .failure(let e): ChangesCoding.writeError(e, zone: r.zoneID, owner: db.id.owner, to: &w)
                    }
                }
            }
        }
        return w.bytes
    }

    /// `records/changes`: `{zoneID, syncToken?, resultsLimit?, desiredKeys?}` → `{zoneID, syncToken, moreComing, records}`.
    func records() throws -> [UInt8] {
        let r = try ZoneChangesRequest(.object(context.body), at: "", defaultLimit: nil, zoneOptional: true)
        let db = context.database
        let changes: ZoneChanges
        let budget = context.responseBudget
        do { changes = try ThreadBridge.wait { try await r.fetch(db, maxBytes: budget) } } catch let e as CloudletError {
            throw APIError(e)
        }
        var w = JSONWriter()
        ChangesCoding.write(
            changes, zone: r.zoneID, owner: db.id.owner, to: &w, assetLinks: context.assetLinks, viewer: context.shareViewer)
        return w.bytes
    }

    /// `changes/database` and `zones/changes`: `{syncToken?, resultsLimit?}` → `{zones: [{zoneID} | {zoneID,
    /// deleted: true}], syncToken, moreComing}`.
    func database() throws -> [UInt8] {
        let body = context.body
        let token = try ChangesCoding.token(body, at: "syncToken")
        let limit = try body.int("resultsLimit", at: "").map(Int.init)
        let db = context.database
        let changes = try ThreadBridge.wait { try await db.databaseChanges(since: token, resultsLimit: limit) }
        var w = JSONWriter()
        ChangesCoding.write(changes, to: &w)
        return w.bytes
    }
}

extension ZoneChangesRequest {
    func fetch(_ db: Database, maxBytes: Int) async throws -> ZoneChanges {
        try await db.zoneChanges(
            zoneID, since: token, resultsLimit: limit, desiredKeys: desiredKeys, desiredRecordTypes: desiredRecordTypes,
            maxBytes: maxBytes)
    }
}
