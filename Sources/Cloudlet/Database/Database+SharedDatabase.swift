import CloudletCore
import Foundation

extension Database {
    // MARK: - The shared database's view

    /// The store key of a zone seen through this shared database: another user's zone some share lets this user see.
    /// - Throws: `badDatabase` for the default zone; `zoneNotFound` for a zone not shared with the user.
    func sharedKey(_ zoneID: ZoneID) throws -> ZoneKey {
        if zoneID.isDefault { throw CloudletError(.badDatabase, "the shared database has no default zone; use a shared zone") }
        guard zoneID.ownerName != defaultOwnerName, zoneID.ownerName != id.owner, (try? Names.validateUser(zoneID.ownerName)) != nil
        else {
            throw CloudletError(
                .zoneNotFound,
                "zone '\(zoneID.zoneName)' of owner '\(zoneID.ownerName)' is not shared with '\(id.owner)' (name the zone's owner in its zoneID)")
        }
        let key = ZoneKey(container: id.container, environment: id.environment, owner: zoneID.ownerName, zoneName: zoneID.zoneName)
        guard sharedZone(key) != nil else {
            throw CloudletError(.zoneNotFound, "zone '\(zoneID.zoneName)' of owner '\(zoneID.ownerName)' is not shared with '\(id.owner)'")
        }
        return key
    }

    /// The longest parent chain followed to find a record's shared root (deeper records are not shared).
    static let maxParentDepth = 64

    /// The permission the user of a shared database has on record `name` whose parent is `parent`: that of the share
    /// covering the record by name, else that of the first ancestor so covered (reading each ancestor for its parent;
    /// `memo` keeps what each name visited resolved to). `.none`: not shared with the user. A deleted ancestor ends the
    /// walk, unless `throughTombstones` (for a deleted record: was it shared when it was deleted?) and its tombstone kept
    /// its parent — then the walk goes on from there (a cascade deletes a subtree together).
    func sharedPermission(
        _ shared: SharedZone, name: String, parent: String?, memo: inout [String: Share.Permission], throughTombstones: Bool = false
    ) async throws -> Share.Permission {
        if shared.covers(name) { return shared.permission(name) }
        guard shared.followsParents else { return .none }
        let partition = store.partition(for: shared.key)
        var visited = [name]
        var next = parent
        var result = Share.Permission.none
        while let current = next, visited.count <= Self.maxParentDepth {
            if let known = memo[current] {
                result = known
                break
            }
            if shared.covers(current) {
                result = shared.permission(current)
                break
            }
            visited.append(current)
            guard let found = try await partition.currentEntry(shared.key, current), let entry = found else { break }
            if entry.deleted {
                guard throughTombstones, let p = entry.parent else { break }
                next = p
                continue
            }
            next = try await partition.read(shared.key, current, entry).parent?.recordName
        }
        for n in visited { memo[n] = result }
        return result
    }

    /// ``sharedPermission(_:name:parent:memo:)`` of a record by name alone (read for its parent when needed); `.none`
    /// for a record that does not exist.
    func sharedPermission(_ shared: SharedZone, of name: String, memo: inout [String: Share.Permission]) async throws
        -> Share.Permission
    {
        if shared.covers(name) { return shared.permission(name) }
        if let known = memo[name] { return known }
        let partition = store.partition(for: shared.key)
        guard shared.followsParents, let found = try await partition.currentEntry(shared.key, name), let entry = found, !entry.deleted
        else { return .none }
        let parent = try await partition.read(shared.key, name, entry).parent?.recordName
        return try await sharedPermission(shared, name: name, parent: parent, memo: &memo)
    }

    /// What this shared database's user may do in `key`; nil when nothing (or outside a shared database).
    func sharedZone(_ key: ZoneKey) -> SharedZone? {
        guard id.scope == .shared else { return nil }
        return SharedZone(key: key, user: id.owner, catalog: store.catalog.snapshot().shares)
    }

    /// The zones shared with this shared database's user, sorted by owner then name.
    func sharedZoneKeys() -> [ZoneKey] {
        store.catalog.snapshot().shares.visibleZones(of: id.owner, container: id.container, environment: id.environment)
    }

    /// The shared database's change feed, paged like a private database's (``DatabaseChangePage``): zones whose
    /// records changed since the token (an owner's partitions, by LSN) while shared with the user, then zones that
    /// became visible, or whose share ended or that the user left or was removed from (the catalog, by version), since
    /// it. The token holds a position per partition and one in the catalog.
    func sharedDatabaseChanges(since token: ChangeToken?, limit: Int) async throws -> DatabaseChanges {
        let partitions = store.partitions
        let catalog = store.catalog.snapshot()
        // From scratch, every visible zone is in its partition's stream: the catalog's starts now.
        var positions = [UInt64](repeating: 0, count: partitions.count) + [catalog.version]
        // A token from before the catalog position was kept: access changes are found by partition LSN, inclusive.
        var legacy = false
        if let token {
            let p = try token.databasePosition()
            guard p.store == store.fingerprint else { throw CloudletError.invalid("the change token belongs to another store") }
            guard p.database == Fingerprint.of(id) else { throw CloudletError.invalid("the change token belongs to another database") }
            guard p.lsns.count == partitions.count + 1 || p.lsns.count == partitions.count else {
                throw CloudletError.invalid("the change token is malformed")
            }
            guard p.lsns.count == partitions.count || p.lsns[partitions.count] <= catalog.version else {
                throw CloudletError.invalid("the change token is ahead of this store")
            }
            legacy = p.lsns.count == partitions.count
            positions = p.lsns + (legacy ? [0] : [])
        }
        let shares = catalog.shares
        let user = id.owner
        let events = (shares.access[user] ?? [:]).filter { $0.key.container == id.container && $0.key.environment == id.environment }
        var byPartition = [[(position: UInt64, zone: ZoneID, deleted: Bool)]](repeating: [], count: partitions.count)
        var access: [(position: UInt64, zone: ZoneID, deleted: Bool)] = []
        let sinceVersion = positions[partitions.count]
        for (key, event) in events {
            let partition = store.partition(for: key)
            let pi = partitions.firstIndex { $0 === partition }!
            let visible = shares.shares(in: key).values.contains { $0.permission(of: user) != .none }
            if visible, let last = partition.state.withLock({ $0.zone(key)?.lastChangeLSN }), token == nil || last > positions[pi] {
                byPartition[pi].append((last, key.zoneID, false))
            }
            if event.version > sinceVersion || (legacy && event.lsn >= positions[pi]) {
                access.append((event.version, key.zoneID, !visible))
            }
        }
        func sorted(_ es: [(position: UInt64, zone: ZoneID, deleted: Bool)]) -> [(position: UInt64, zone: ZoneID, deleted: Bool)] {
            es.sorted { ($0.position, $0.zone.ownerName, $0.zone.zoneName) < ($1.position, $1.zone.ownerName, $1.zone.zoneName) }
        }
        var page = DatabaseChangePage(limit: limit)
        var next = positions
        for (pi, p) in partitions.enumerated() {
            let end = p.state.withLock { $0.lastLSN }
            next[pi] = page.take(sorted(byPartition[pi]), since: positions[pi], end: max(end, positions[pi]))
            try await p.waitDurable(min(next[pi], p.log.lastLSN))
        }
        next[partitions.count] = page.take(sorted(access), since: sinceVersion, end: catalog.version)
        let horizons = partitions.map { p in p.state.withLock { $0.purgedThroughLSN } } + [0]
        let t = ChangeToken(
            ChangeToken.DatabasePosition(store: store.fingerprint, database: Fingerprint.of(id), lsns: next, horizons: horizons))
        return DatabaseChanges(changedZones: page.changed, deletedZones: page.deleted, token: t, moreComing: page.moreComing)
    }
}

extension RecordOperation {
    /// Whether the operation saves the whole record as given (a replacement): its parent too, nil included.
    var replacesWhole: Bool {
        switch self {
        case .create, .replace, .forceReplace: true
        case .update, .forceUpdate, .delete, .forceDelete: false
        }
    }

    /// Whether the operation deletes its record.
    var isDeletion: Bool {
        switch self {
        case .delete, .forceDelete: true
        case .create, .update, .forceUpdate, .replace, .forceReplace: false
        }
    }
}
