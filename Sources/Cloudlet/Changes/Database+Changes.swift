import CloudletConcurrency
import CloudletCore

extension Fingerprint {
    static func of(_ d: DatabaseID) -> UInt64 {
        of([d.container, d.environment.rawValue, d.scope.rawValue, d.owner])
    }
}

extension Database {
    /// The most changes one call returns, and the default.
    public static let maxChangesPerPage = CloudletLimits.changesPerPage

    /// The records of a zone changed or deleted since `token` (nil: since the zone was created), in commit order,
    /// each once at its latest version; at most `resultsLimit` (default and maximum 200) per call.
    ///
    /// - Parameters:
    ///   - desiredKeys: return only these fields of changed records (nil: all).
    ///   - desiredRecordTypes: report only records of these types (nil: all).
    ///   - maxBytes: the page's byte budget (nil: none), counted as ``RecordEntry/pageCost`` (a record's stored
    ///     size, a tombstone's name plus 64): the page ends early, with `moreComing`, before the change that would
    ///     pass it. A page with a positive budget carries at least one change however large; with 0 it carries
    ///     none and only tells whether changes are waiting (`moreComing`, token unchanged).
    /// - Throws: `zoneNotFound`; `invalidArguments` for a token of another store or zone, or a malformed one;
    ///   `changeTokenExpired` for a token older than the tombstone retention window or from before the zone was
    ///   deleted and re-created — fetch from scratch (token nil).
    public func zoneChanges(
        _ zoneID: ZoneID, since token: ChangeToken?, resultsLimit: Int?, desiredKeys: [String]?,
        desiredRecordTypes: [String]?
    ) async throws -> ZoneChanges {
        try await zoneChanges(
            zoneID, since: token, resultsLimit: resultsLimit, desiredKeys: desiredKeys, desiredRecordTypes: desiredRecordTypes,
            maxBytes: nil)
    }

    /// ``zoneChanges(_:since:resultsLimit:desiredKeys:desiredRecordTypes:)`` within a byte budget.
    public func zoneChanges(
        _ zoneID: ZoneID, since token: ChangeToken? = nil, resultsLimit: Int? = nil, desiredKeys: [String]? = nil,
        desiredRecordTypes: [String]? = nil, maxBytes: Int?
    ) async throws -> ZoneChanges {
        try authorize(.read)
        let limit = try Self.pageLimit(resultsLimit)
        let budget = try Self.byteBudget(maxBytes)
        let key = try key(zoneID)
        let partition = store.partition(for: key)
        let storeFP = store.fingerprint
        let types = desiredRecordTypes.map(Set.init)
        // Collect the page's entries from a view of the key directory (taken under the lock, O(1)), off the
        // cooperative pool: the change index may be read from disk. Read the records after.
        let view = partition.state.withLock { $0.directoryView }
        let scope = id.scope
        let (page, next, more, horizon, spent) = try await ThreadBridge.offload {
            () throws -> ([(String, RecordEntry)], ChangePoint, Bool, UInt64, Int) in
            let st = view
            guard st.zoneExists(key) else {
                throw CloudletError(.zoneNotFound, "zone '\(key.zoneName)' does not exist in the \(scope.rawValue) database")
            }
            let zone = st.zone(key)
            var from = ChangePoint.zero
            if let token {
                let p = try token.zonePosition()
                guard p.store == storeFP else {
                    throw CloudletError.invalid("the change token belongs to another store")
                }
                guard p.zone == key.stableHash else {
                    throw CloudletError.invalid("the change token belongs to another zone than '\(key.zoneName)'")
                }
                guard p.incarnation == (zone?.createdLSN ?? 0) else {
                    throw CloudletError(
                        .changeTokenExpired, "zone '\(key.zoneName)' was deleted and re-created since the token; fetch from scratch")
                }
                guard p.point.lsn <= st.lastLSN else {
                    throw CloudletError.invalid("the change token is ahead of this store (LSN \(p.point.lsn) > \(st.lastLSN))")
                }
                // Tombstones after the token's point were forgotten by a purge made since the token was issued.
                if p.point.lsn < st.purgedThroughLSN && p.horizon < st.purgedThroughLSN {
                    throw CloudletError(
                        .changeTokenExpired,
                        "the change token is older than the tombstone retention window; fetch the zone from scratch")
                }
                from = p.point
            }
            var page: [(String, RecordEntry)] = []
            let horizon = st.purgedThroughLSN
            guard zone != nil else { return (page, ChangePoint(lsn: st.lastLSN, index: .max), false, horizon, 0) }
            var last = from
            var spent = 0
            var changes = st.changes(in: key, after: from).makeIterator()
            while let (name, e) = try changes.next() {
                let point = e.change
                if page.count == limit { return (page, last, true, horizon, spent) }
                if let types, !types.contains(e.recordType) {
                    last = point
                    continue
                }
                let cost = e.pageCost(name)
                if spent + cost > budget && (!page.isEmpty || budget == 0) { return (page, last, true, horizon, spent) }
                spent += cost
                last = point
                page.append((name, e))
            }
            return (page, ChangePoint(lsn: st.lastLSN, index: .max), false, horizon, spent)
        }
        // Nothing that could still be lost in a crash is reported, and the token never points past what is durable.
        try await partition.waitDurable(min(next.lsn, partition.log.lastLSN))
        // One trip off the cooperative pool for the page's records, each frame read once.
        let wanted = page.filter { !$0.1.deleted }.map { (zone: key, name: $0.0, entry: $0.1) }
        let read = wanted.isEmpty ? [] : await ThreadBridge.offload { partition.readMany(wanted) }
        var records: [String: Result<Record, CloudletError>] = [:]
        for (item, result) in zip(wanted, read) { records[item.name] = result }
        var changes: [RecordChange] = []
        changes.reserveCapacity(page.count)
        // In the public database, the changes of records the caller may not read are left out (a deletion when it
        // may read none of its type).
        let security = self.security
        // In a shared database, only the changes of records the zone's shares cover (by name or parent chain; a deletion
        // of a record that was covered when it was deleted: its tombstone kept its parent).
        let shared = sharedZone(key)
        var memo: [String: Share.Permission] = [:]
        var deletedMemo: [String: Share.Permission] = [:]
        for (name, e) in page {
            if let shared, !shared.covers(name) {
                if e.deleted {
                    guard try await sharedPermission(shared, name: name, parent: e.parent, memo: &deletedMemo, throughTombstones: true) != .none
                    else { continue }
                } else {
                    guard case .success(let r)? = records[name],
                        try await sharedPermission(shared, name: name, parent: r.parent?.recordName, memo: &memo) != .none
                    else { continue }
                }
            }
            let rid = RecordID(recordName: name, zoneID: key.zoneID)
            let readable = readScope(e.recordType, in: security)
            if readable == .none { continue }
            if e.deleted {
                changes.append(.deleted(rid, recordType: e.recordType))
                continue
            }
            switch records[name]! {
            case .success(var r):
                guard readable.admits(creator: r.created?.userRecordName) else { continue }
                if let desiredKeys { r.fields = r.fields.filter { desiredKeys.contains($0.key) } }
                changes.append(.changed(r))
            case .failure(let error) where error.code == .unknownItem:
                // Deleted (and its version compacted away) since the page was collected: the deletion is news.
                changes.append(.deleted(rid, recordType: e.recordType))
            case .failure(let error):
                throw error
            }
        }
        let zoneState = partition.state.withLock { $0.zone(key)?.createdLSN ?? 0 }
        let t = ChangeToken(ChangeToken.ZonePosition(
                store: storeFP, zone: key.stableHash, incarnation: zoneState, point: next, horizon: horizon))
        return ZoneChanges(changes: changes, token: t, moreComing: more, byteCount: spent)
    }

    /// The zones of this database created, changed or deleted since `token` (nil: all zones), at most
    /// `resultsLimit` (default and maximum 200) per call. Private and shared databases only, as in CloudKit.
    public func databaseChanges(since token: ChangeToken? = nil, resultsLimit: Int? = nil) async throws -> DatabaseChanges {
        try authorize(.read)
        guard id.scope != .public else {
            throw CloudletError(.badDatabase, "database changes are not available for the public database")
        }
        let limit = try Self.pageLimit(resultsLimit)
        if id.scope == .shared { return try await sharedDatabaseChanges(since: token, limit: limit) }
        let partitions = store.partitions
        var lsns = [UInt64](repeating: 0, count: partitions.count)
        var issuedHorizons = [UInt64](repeating: 0, count: partitions.count)
        if let token {
            let p = try token.databasePosition()
            guard p.store == store.fingerprint else { throw CloudletError.invalid("the change token belongs to another store") }
            guard p.database == Fingerprint.of(id) else {
                throw CloudletError.invalid("the change token belongs to another database")
            }
            guard p.lsns.count == partitions.count else { throw CloudletError.invalid("the change token is malformed") }
            lsns = p.lsns
            issuedHorizons = p.horizons
        }
        var horizons = issuedHorizons
        var page = DatabaseChangePage(limit: limit)
        var next = lsns
        for (pi, partition) in partitions.enumerated() {
            let since = lsns[pi]
            let issued = issuedHorizons[pi]
            let (events, last, expired, ahead, horizon) = partition.state.withLock { st in
                var events: [(lsn: UInt64, zone: String, deleted: Bool)] = []
                for key in st.zoneKeys(of: id) {
                    let zone = st.zone(key)!
                    guard zone.lastChangeLSN > since else { continue }
                    // A zone nobody wrote to is reported once it exists as a custom zone.
                    if key.zoneName == ZoneID.defaultZoneName && zone.entryCount == 0 { continue }
                    events.append((zone.lastChangeLSN, key.zoneName, false))
                }
                for (key, d) in st.deletedZones where id.holds(key) && d.lsn > since {
                    events.append((d.lsn, key.zoneName, true))
                }
                events.sort { ($0.lsn, $0.zone) < ($1.lsn, $1.zone) }
                let expired = token != nil && since < st.purgedThroughLSN && issued < st.purgedThroughLSN
                return (events, st.lastLSN, expired, since > st.lastLSN, st.purgedThroughLSN)
            }
            horizons[pi] = horizon
            if ahead { throw CloudletError.invalid("the change token is ahead of this store") }
            if expired {
                throw CloudletError(
                    .changeTokenExpired, "the change token is older than the tombstone retention window; fetch from scratch")
            }
            next[pi] = page.take(
                events.map { ($0.lsn, ZoneID(zoneName: $0.zone, ownerName: id.owner), $0.deleted) }, since: since, end: last)
            try await partition.waitDurable(min(next[pi], partition.log.lastLSN))
        }
        let t = ChangeToken(
            ChangeToken.DatabasePosition(store: store.fingerprint, database: Fingerprint.of(id), lsns: next, horizons: horizons))
        return DatabaseChanges(changedZones: page.changed, deletedZones: page.deleted, token: t, moreComing: page.moreComing)
    }

    /// `maxBytes` checked: nil is no budget (`Int.max`); a negative budget is `invalidArguments`.
    static func byteBudget(_ maxBytes: Int?) throws -> Int {
        guard let maxBytes else { return .max }
        guard maxBytes >= 0 else { throw CloudletError.invalid("maxBytes must be at least 0, not \(maxBytes)") }
        return maxBytes
    }

    static func pageLimit(_ requested: Int?) throws -> Int {
        guard let requested else { return maxChangesPerPage }
        guard requested >= 1 else { throw CloudletError.invalid("resultsLimit must be at least 1, not \(requested)") }
        return min(requested, maxChangesPerPage)
    }
}
