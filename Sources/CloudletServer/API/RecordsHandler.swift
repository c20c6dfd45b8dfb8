import CloudletConcurrency
import CloudletWire
import Cloudlet

/// `records/modify` and `records/lookup`.
///
/// A request is checked whole before anything is written: its shape, operation types, record names and every
/// field value against its type tag. Any fault there is a `BAD_REQUEST` for the request, naming the member
/// (`operations[2].record.fields.age.value`), and nothing is applied. What only the engine can decide (change tags,
/// existence, schema types, the 1 MB record limit, atomic zones) comes back per record in a 200 response, in
/// request order, as in CloudKit.
struct RecordsHandler {
    let context: RequestContext

    func modify() throws -> [UInt8] {
        let request = try ModifyRequest(context.body)
        var parsed = request.operations
        let (atomic, requestKeys, numbersAsStrings) = (request.atomic, request.desiredKeys, request.numbersAsStrings)
        try resolveRecordTypes(&parsed)
        // Shares are records of their zone: in a private database, saving one goes with the request's records into the
        // zone's one commit (a share and its root: both or neither), and deleting one (ending it) is a record deletion;
        // in a shared database, a participant deleting a share leaves it, in the zone's commit too (the engine's rule).
        let db = context.database
        let shareOps = Set(parsed.indices.filter { parsed[$0].share != nil })
        let recordOps = parsed.indices.filter { !shareOps.contains($0) }
        var schema = SchemaHints(container: context.container, environment: context.path.environment)
        let operations = try recordOps.map { try parsed[$0].operation(fieldType: { schema.type(of: $1, in: $0) }) }
        let emails = shareOps.isEmpty ? [:] : try participantEmails(parsed, shareOps.sorted())
        let shareRoots = Self.rootsOfShares(parsed)
        var shareResults: [Int: Result<Share, CloudletError>] = [:]
        var saving: [(index: Int, save: ShareSave)] = []
        let saves = shareOps.sorted()
        // The shares an update starts from (its change tag is checked again when it commits).
        let updated = saves.filter { parsed[$0].kind != .create }
        let updatedIDs = updated.map { ($0, parsed[$0].recordID) }
        let existing: [Int: Share] = updated.isEmpty ? [:] : try ThreadBridge.wait {
            var found: [Int: Share] = [:]
            for (i, id) in updatedIDs { found[i] = try? await db.share(for: id) }
            return found
        }
        for i in saves {
            do {
                let share = try Self.shareToSave(parsed[i], existing: existing[i], roots: shareRoots, emails: emails)
                saving.append((i, ShareSave(share, createShortGUID: parsed[i].share!.createShortGUID)))
            } catch let e as CloudletError { shareResults[i] = .failure(e) }
        }

        let rule = context.assets?.receiptRule(context)
        let reserved = try context.quota?.check(operations, in: db, container: context.container) ?? [:]
        var committed = false
        defer { context.quota?.finished(reserved, committed: committed) }
        let shareSaves = saving.map(\.save)
        let (recordResults, savedShares) = operations.isEmpty && shareSaves.isEmpty
            ? ([], []) : try ThreadBridge.wait { try await db.modify(operations, saving: shareSaves, atomic: atomic, assetRule: rule) }
        committed = true
        for ((i, _), r) in zip(saving, savedShares) { shareResults[i] = r }
        let links = context.assetLinks
        var byIndex: [Int: RecordResult] = [:]
        for (i, r) in zip(recordOps, recordResults) { byIndex[i] = r }
        let caller = context.principal.access.userRecordName
        // A share's root names it (`share`), as in CloudKit; after the share operations, which may have just made it one.
        let roots = db.rootShares(of: recordResults.compactMap(\.record))

        var w = JSONWriter(capacity: 256 * parsed.count + 16)
        w.object { w in
            w.key("records")
            w.array { w in
                for (i, op) in parsed.enumerated() {
                    if let shared = shareResults[i] {
                        switch shared {
                        case .success(let s): ShareCoding.write(s, caller: caller, baseURL: context.baseURL, to: &w)
                        case .failure(let e): RecordCoding.writeError(e, recordName: op.recordName, to: &w, numbersAsStrings: numbersAsStrings)
                        }
                        continue
                    }
                    switch byIndex[i]! {
                    case .saved(let r):
                        let keys = (op.desiredKeys ?? requestKeys).map(Set.init)
                        RecordCoding.write(
                            r, to: &w, desiredKeys: keys, numbersAsStrings: numbersAsStrings, assetLinks: links, share: roots[r.id],
                            viewer: context.shareViewer)
                    case .deleted(let id): RecordCoding.writeDeleted(id, to: &w)
                    case .failed(let id, let e):
                        RecordCoding.writeError(
                            e, recordName: id.recordName, to: &w, numbersAsStrings: numbersAsStrings, assetLinks: links)
                    }
                }
            }
        }
        return w.bytes
    }

    /// CloudKit lets `update` and friends omit `recordType`: take it from the stored record. A record that does
    /// not exist cannot be created without one (`forceUpdate`, `forceReplace`: `BAD_REQUEST`); for `update` and
    /// `replace` the engine reports the missing record itself, so any type does.
    private func resolveRecordTypes(_ ops: inout [ParsedOperation]) throws {
        let missing = ops.indices.filter { ops[$0].recordType == nil && !ops[$0].kind.isDelete }
        guard !missing.isEmpty else { return }
        let ids = missing.map { ops[$0].recordID }
        let db = context.database
        let found = try ThreadBridge.wait { try await db.records(for: ids) }
        for (i, result) in zip(missing, found) {
            switch result {
            case .success(let r): ops[i].recordType = r.recordType
            case .failure(let e) where e.code == .unknownItem && (ops[i].kind == .forceUpdate || ops[i].kind == .forceReplace):
                throw APIError.badRequest(
                    "\(ops[i].path).record.recordType is missing and record '\(ops[i].recordName)' does not exist, "
                        + "so \(ops[i].kind.rawValue) would create it without a type")
            case .failure: ops[i].recordType = "Unknown"  // never stored: the engine fails this operation first
            }
        }
    }

    func lookup() throws -> [UInt8] {
        let body = context.body
        let request = try LookupRequest(body)
        let (ids, keys, numbersAsStrings) = (request.recordIDs, request.desiredKeys, request.numbersAsStrings)
        let db = context.database
        let budget = context.responseBudget
        // Straight from the engine on this worker when nothing has to be waited for (cached or on disk, durable, not the
        // shared database): no task and no hop, under the same one-per-core admission; otherwise the async read.
        let results = try ThreadBridge.admitted { try db.recordsBlocking(for: ids, maxBytes: budget) }
            ?? ThreadBridge.wait { try await db.records(for: ids, maxBytes: budget) }
        let links = context.assetLinks
        // Shares are looked up by record name too: a name the zone has no record of may be one of its shares.
        let missing = ids.indices.filter { if case .failure(let e) = results[$0] { e.code == .unknownItem } else { false } }
        let shares: [Int: Share] = missing.isEmpty ? [:] : try ThreadBridge.wait {
            var found: [Int: Share] = [:]
            for i in missing { found[i] = try? await db.share(for: ids[i]) }
            return found
        }
        let caller = context.principal.access.userRecordName
        let roots = db.rootShares(of: results.compactMap { try? $0.get() })
        var w = JSONWriter(capacity: 256 * results.count + 16)
        w.object { w in
            w.key("records")
            w.array { w in
                for (i, ((id, result), desired)) in zip(zip(ids, results), keys).enumerated() {
                    if let share = shares[i] {
                        ShareCoding.write(share, caller: caller, baseURL: context.baseURL, to: &w)
                        continue
                    }
                    switch result {
                    case .success(let r):
                        RecordCoding.write(
                            r, to: &w, desiredKeys: desired, numbersAsStrings: numbersAsStrings, assetLinks: links, share: roots[r.id],
                            viewer: context.shareViewer)
                    case .failure(let e):
                        RecordCoding.writeError(
                            e, recordName: id.recordName, to: &w, numbersAsStrings: numbersAsStrings, assetLinks: links)
                    }
                }
            }
        }
        return w.bytes
    }
}
