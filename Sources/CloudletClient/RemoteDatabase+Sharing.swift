import CloudletCore
import CloudletModel
import CloudletWire

/// Sharing over Web Services (docs/sharing.md): shares are `cloudkit.share` records of `records/modify` and
/// `records/lookup`; resolve and accept are `records/resolve` and `records/accept` of the public database.
extension RemoteDatabase {
    public func saveShare(_ share: Share, createShortGUID: Bool) async throws -> Share {
        let body = Self.json { w in
            w.object { w in
                w.key("operations")
                w.array { w in ShareCoding.writeSaveOperation(share, createShortGUID: createShortGUID, to: &w) }
            }
        }
        let response = try await call("records/modify", body: body, changesData: true)
        return try oneShare(response, for: share.id)
    }

    public func share(for recordID: RecordID) async throws -> Share {
        let body = Self.json { w in
            w.object { w in
                w.key("records")
                w.array { w in
                    w.object { w in
                        w.member("recordName", recordID.recordName)
                        w.key("zoneID")
                        ZoneIDCoding.writeRequest(recordID.zoneID, to: &w)
                    }
                }
            }
        }
        let response = try await call("records/lookup", body: body, changesData: false)
        return try oneShare(response, for: recordID)
    }

    public func deleteShare(_ shareID: RecordID) async throws {
        let results = try await modify([.forceDelete(shareID)], atomic: true)
        if let e = results[0].error { throw e }
    }

    public func resolveShare(shortGUID: String, fetchRootRecord: Bool) async throws -> ShareMetadata {
        try await shareMetadata("records/resolve", shortGUID, fetchRootRecord: fetchRootRecord)
    }

    public func acceptShare(shortGUID: String) async throws -> ShareMetadata {
        try await shareMetadata("records/accept", shortGUID, fetchRootRecord: false)
    }

    /// `records/resolve` or `records/accept` of one short GUID, in the public database whatever this one is.
    private func shareMetadata(_ operation: String, _ shortGUID: String, fetchRootRecord: Bool) async throws -> ShareMetadata {
        let body = Self.json { w in
            w.object { w in
                w.key("shortGUIDs")
                w.array { w in
                    w.object { w in
                        w.member("value", shortGUID)
                        w.member("shouldFetchRootRecord", fetchRootRecord)
                    }
                }
            }
        }
        let response = try await container.database(.public).call(operation, body: body, changesData: operation == "records/accept")
        return try decoding {
            let o = try ClientCoding.items(response, key: "results", count: 1)[0].requireObject(at: "results[0]")
            if let e = try ClientCoding.error(o, at: "results[0]", zone: .default) { throw e }
            return try ShareCoding.decodeMetadata(o, at: "results[0]")
        }
    }

    /// The one share (or its error) of a `records/modify` or `records/lookup` response.
    private func oneShare(_ response: [String: JSONValue], for id: RecordID) throws -> Share {
        try decoding {
            let o = try ClientCoding.items(response, key: "records", count: 1)[0].requireObject(at: "records[0]")
            if let e = try ClientCoding.error(o, at: "records[0]", zone: id.zoneID) { throw e }
            guard try o.string("recordType", at: "records[0]") == Share.recordType else {
                throw CloudletError(.unknownItem, "'\(id.recordName)' is a record, not a share")
            }
            return try ShareCoding.decodeShare(o, at: "records[0]", zone: id.zoneID)
        }
    }
}
