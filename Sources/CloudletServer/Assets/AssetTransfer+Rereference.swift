import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletWire

extension AssetTransfer {
    // MARK: - assets/rereference

    /// `assets/rereference` (CloudKit's "Referencing Existing Assets"): `{zoneID?, assets:[{recordName, fieldName}]}`
    /// → `{assets:[…]}`, for each requested field the asset value(s) it holds, with a fresh receipt that lets this
    /// caller put the same file into another record's asset field of this database (any zone, type and field) without
    /// uploading it again. Each answer is an asset dictionary (`fileChecksum`, `size`, `receipt`, `referenceChecksum`,
    /// `downloadURL`) with the `recordName` and `fieldName` it came from; an asset list field gives one per member,
    /// each with its `index`. A record the caller cannot read, or that does not exist, is `NOT_FOUND`; a field that is
    /// missing or holds no asset is `BAD_REQUEST` (per item, like `records/lookup`'s errors). Each file's grace
    /// window starts again (``BlobStore/refresh(_:)``), so it outlives the receipt even if its last record goes.
    func rereference(_ context: RequestContext) throws -> [UInt8] {
        let body = context.body
        let zone = try ZoneIDCoding.decode(body["zoneID"], at: "zoneID") ?? .default
        guard case .array(let items)? = body["assets"], !items.isEmpty else {
            throw APIError.badRequest("assets must be a non-empty array of {recordName, fieldName}")
        }
        guard items.count <= CloudletLimits.operationsPerRequest else {
            throw APIError.badRequest("\(items.count) assets in one request; the limit is \(CloudletLimits.operationsPerRequest)")
        }
        var requested: [(name: String, field: String)] = []
        for (i, json) in items.enumerated() {
            let path = "assets[\(i)]"
            let o = try json.requireObject(at: path)
            requested.append((try Self.name("recordName", of: o, at: path), try Self.name("fieldName", of: o, at: path)))
        }
        let db = context.database
        _ = try ThreadBridge.wait { try await db.zone(for: zone) }  // access, and ZONE_NOT_FOUND
        let ids = requested.map { RecordID(recordName: $0.name, zoneID: zone) }
        let found = try ThreadBridge.wait { try await db.records(for: ids) }
        let base = ticket(.receipt, context)
        let links = links(context)
        var w = JSONWriter(capacity: 320 * requested.count + 16)
        w.object { w in
            w.key("assets")
            w.array { w in
                for ((name, field), result) in zip(requested, found) {
                    func refuse(_ e: CloudletError) {
                        w.object { w in
                            w.member("recordName", name)
                            w.member("fieldName", field)
                            APIError(e).writeMembers(to: &w)
                        }
                    }
                    let record: Record
                    switch result {
                    case .success(let r): record = r
                    case .failure(let e):
                        refuse(e)
                        continue
                    }
                    guard let value = record.fields[field], case let assets = value.assets, !assets.isEmpty else {
                        refuse(.invalid("field '\(field)' of record '\(name)' holds no asset"))
                        continue
                    }
                    let isList = if case .list = value { true } else { false }
                    for (index, asset) in assets.enumerated() {
                        // The file must still be here (a reader of a damaged store gets an error, not a receipt).
                        guard store.assets.refresh(asset.fileChecksum) else {
                            refuse(CloudletError(.unknownItem, "the file of field '\(field)' of record '\(name)' is missing from the store"))
                            continue
                        }
                        var t = base
                        t.checksum = asset.fileChecksum
                        t.size = asset.size
                        w.object { w in
                            w.member("recordName", name)
                            w.member("fieldName", field)
                            if isList { w.member("index", Int64(index)) }
                            w.member("fileChecksum", asset.fileChecksum)
                            w.member("size", asset.size)
                            w.member("receipt", signer.sign(t))
                            w.member("referenceChecksum", asset.fileChecksum)
                            if let url = links(asset) { w.member("downloadURL", url) }
                        }
                    }
                }
            }
        }
        return w.bytes
    }
}
