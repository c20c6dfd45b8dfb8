import CloudletConcurrency
import CloudletWire
import Cloudlet

/// `records/resolve` and `records/accept` (public database): share metadata by short GUID, and accepting shares.
/// One result per short GUID, in order; a GUID that fails carries its error (`NOT_FOUND`, `ACCESS_DENIED`) in place.
struct SharesHandler {
    let context: RequestContext

    func resolve() throws -> [UInt8] { try respond(accepting: false) }
    func accept() throws -> [UInt8] { try respond(accepting: true) }

    private func respond(accepting: Bool) throws -> [UInt8] {
        guard context.path.scope == .public else {
            throw APIError.badRequest(
                "records/\(accepting ? "accept" : "resolve") is a public database operation, not one of the \(context.path.scope.rawValue) database")
        }
        let guids = try ShareCoding.decodeShortGUIDs(context.body)
        let db = context.database
        let results = try ThreadBridge.wait {
            try await perItemResults(guids) { g in
                accepting
                    ? try await db.acceptShare(shortGUID: g.value)
                    : try await db.resolveShare(shortGUID: g.value, fetchRootRecord: g.fetchRoot)
            }
        }
        let caller = context.principal.access.userRecordName
        let links = context.assetLinks
        var w = JSONWriter(capacity: 512 * guids.count + 16)
        w.object { w in
            w.key("results")
            w.array { w in
                for (g, result) in zip(guids, results) {
                    switch result {
                    case .success(let m):
                        ShareCoding.writeMetadata(
                            m, shortGUID: g.value, container: context.container.identifier,
                            environment: context.path.environment.rawValue, caller: caller, baseURL: context.baseURL, to: &w
                        ) { r, w in RecordCoding.write(r, to: &w, desiredKeys: nil, numbersAsStrings: false, assetLinks: links) }
                    case .failure(let e):
                        w.object { w in
                            w.member("shortGUID", g.value)
                            APIError(e).writeMembers(to: &w)
                        }
                    }
                }
            }
        }
        return w.bytes
    }
}

extension RecordsHandler {
    /// The user record names of the participants `indices` of `parsed` name by email address (users created with an
    /// email). - Throws: `BAD_REQUEST` for an address no user has.
    func participantEmails(_ parsed: [ParsedOperation], _ indices: [Int]) throws -> [String: String] {
        var emails: [String: String] = [:]
        let wanted = Set(indices.flatMap { parsed[$0].share?.participants ?? [] }.compactMap { $0.userRecordName == nil ? $0.emailAddress?.lowercased() : nil })
        if !wanted.isEmpty, let credentials = context.credentials {
            let users = try ThreadBridge.wait { try await credentials.users() }
            for u in users { if let e = u.email, wanted.contains(e) { emails[e] = u.user.userRecordName } }
        }
        for i in indices {
            for p in parsed[i].share?.participants ?? [] where p.userRecordName == nil && emails[p.emailAddress!.lowercased()] == nil {
                throw APIError.badRequest("\(parsed[i].path): no user has email address '\(p.emailAddress!)'")
            }
        }
        return emails
    }

    /// The roots of shares saved with their root record: share name → the record whose `share` names it.
    static func rootsOfShares(_ parsed: [ParsedOperation]) -> [String: RecordID] {
        var rootOf: [String: RecordID] = [:]
        for op in parsed { if let s = op.shareName { rootOf[s] = op.recordID } }
        return rootOf
    }

    /// The share a save operation `op` asks for, over `existing` (the share as stored, if any).
    static func shareToSave(_ op: ParsedOperation, existing: Share?, roots: [String: RecordID], emails: [String: String]) throws -> Share {
        let parsedShare = op.share!
        var share: Share
        if let existing, op.kind != .create {
            share = existing
            if op.kind == .update || op.kind == .replace { share.changeTag = op.changeTag }
        } else if op.recordName == Share.zoneWideShareName {
            share = Share(zone: op.zone)
        } else {
            guard let root = parsedShare.forRecord.map({ RecordID(recordName: $0.recordName, zoneID: op.zone) }) ?? roots[op.recordName]
            else {
                throw CloudletError.invalid(
                    "share '\(op.recordName)' has no root record: save it with the root record (whose 'share' names it) or give forRecord")
            }
            share = Share(root: root, recordName: op.recordName)
            share.changeTag = existing == nil ? nil : op.changeTag
        }
        if let p = parsedShare.publicPermission { share.publicPermission = p }
        if let ps = parsedShare.participants {
            share.participants = ps.map { p in
                let name = p.userRecordName ?? emails[p.emailAddress!.lowercased()]!
                var out = share.participant(name) ?? Share.Participant(userRecordName: name, emailAddress: p.emailAddress)
                out.permission = p.permission
                // Left as it was, acceptance is the participant's; REMOVED removes, and one removed listed
                // without it is invited again (the engine's rule, `Database.mergedParticipants`).
                if let a = p.acceptance { out.acceptance = a } else if out.acceptance == .removed { out.acceptance = .pending }
                return out
            }
        }
        return share
    }
}
