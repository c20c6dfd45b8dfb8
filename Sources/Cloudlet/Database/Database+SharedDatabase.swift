import CloudletCore
import Foundation

/// What a shared database's user may do in one zone shared with them: the zone's shares that grant them something.
/// Every shared-database call goes through one of these (``Database/sharedZone(_:)``); private and public databases
/// never build one.
struct SharedZone: Sendable {
    let key: ZoneKey
    let user: String
    /// The zone's shares that grant `user` READ_ONLY or READ_WRITE.
    let shares: [Share]
    /// Whether one of them is zone-wide (then every record is covered: a query of a shared zone checks nothing more).
    let zoneWide: Bool

    init(key: ZoneKey, user: String, shares: [Share]) {
        self.key = key
        self.user = user
        self.shares = shares
        zoneWide = shares.contains(where: \.isZoneWide)
    }

    /// Whether a record is covered by a share granting the user something by its name alone: a zone-wide share's
    /// record, a hierarchy share's root, or a share. A descendant of a root is covered through its parent chain
    /// (``Database/sharedPermission(_:name:parent:memo:)``).
    func covers(_ name: String) -> Bool { zoneWide || shares.contains { $0.covers(name) } }

    /// Whether some share is a hierarchy share (whose coverage follows parent chains).
    var followsParents: Bool { shares.contains { !$0.isZoneWide } }

    /// The best permission the shares covering `name` by its name give.
    func permission(_ name: String) -> Share.Permission {
        shares.filter { $0.covers(name) }.map { $0.permission(of: user) }.contains(.readWrite) ? .readWrite
            : covers(name) ? .readOnly : .none
    }

    /// Throws `permissionFailure` for a share written as a record (``Database/deleteShare(_:)`` is how a participant
    /// leaves one) and for the deletion of a share's root (only the owner's).
    func checkNotShareOrRoot(_ op: RecordOperation) throws {
        let name = op.recordID.recordName
        if shares.contains(where: { $0.id.recordName == name }) || op.record?.recordType == Share.recordType {
            throw CloudletError(
                .permissionFailure, "'\(user)' cannot write share '\(name)' of '\(key.owner)' as a record; deleting it leaves the share")
        }
        if op.record == nil, shares.contains(where: { $0.rootRecordName == name }) {
            throw CloudletError(.permissionFailure, "only the owner '\(key.owner)' may delete '\(name)', the root record of a share")
        }
    }

    /// Throws `permissionFailure` unless `permission` lets the user write record `name`.
    func requireWritable(_ name: String, _ permission: Share.Permission) throws {
        switch permission {
        case .readWrite: return
        case .readOnly:
            throw CloudletError(.permissionFailure, "'\(user)' may only read record '\(name)' (the share is READ_ONLY for them)")
        case .none:
            throw CloudletError(
                .permissionFailure,
                "record '\(name)' of zone '\(key.zoneName)' is not shared with '\(user)' (its parent chain does not lead to a shared root)")
        }
    }
}

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
    /// `memo` keeps what each name visited resolved to). `.none`: not shared with the user.
    func sharedPermission(_ shared: SharedZone, name: String, parent: String?, memo: inout [String: Share.Permission]) async throws
        -> Share.Permission
    {
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
            guard let found = try await partition.currentEntry(shared.key, current), let entry = found, !entry.deleted else { break }
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

    /// Throws `permissionFailure` unless this shared database's user may apply `op` in `shared`'s zone: a record that
    /// exists must be covered by a READ_WRITE share (by name or through its parent chain); a new one must be (a
    /// zone-wide share's, or a child whose parent is); a record given a new parent must stay within READ_WRITE
    /// shared records; a share is not written as a record; a share's root is deleted only by the owner.
    func checkShared(_ op: RecordOperation, in shared: SharedZone, memo: inout [String: Share.Permission]) async throws {
        try shared.checkNotShareOrRoot(op)
        let name = op.recordID.recordName
        let current = try await sharedPermission(shared, of: name, memo: &memo)
        let exists = try await store.partition(for: shared.key).currentEntry(shared.key, name).flatMap { $0 }.map { !$0.deleted } ?? false
        if exists || shared.covers(name) {
            try shared.requireWritable(name, current)
        }
        if let parent = op.record?.parent?.recordName {
            try shared.requireWritable(name, try await sharedPermission(shared, of: parent, memo: &memo))
        } else if !exists && !shared.covers(name) {
            try shared.requireWritable(name, .none)
        } else if exists && !shared.covers(name), op.replacesWhole {
            // A replacement without a parent would take the record out of the share.
            throw CloudletError(
                .permissionFailure, "record '\(name)' is shared through its parent; saving it without one would take it out of the share")
        }
    }

    /// What this shared database's user may do in `key`; nil when nothing (or outside a shared database).
    func sharedZone(_ key: ZoneKey) -> SharedZone? {
        guard id.scope == .shared else { return nil }
        let user = id.owner
        let granting = store.catalog.snapshot().shares.shares(in: key).values.filter { $0.permission(of: user) != .none }
        return granting.isEmpty ? nil : SharedZone(key: key, user: user, shares: granting.sorted { $0.id.recordName < $1.id.recordName })
    }

    /// The zones shared with this shared database's user, sorted by owner then name.
    func sharedZoneKeys() -> [ZoneKey] {
        store.catalog.snapshot().shares.visibleZones(of: id.owner, container: id.container, environment: id.environment)
    }

    /// The shared database's change feed: zones that became visible or changed since the token, and zones whose share
    /// ended (or that the user left) since it. The token is a database position like a private database's.
    func sharedDatabaseChanges(since token: ChangeToken?) async throws -> DatabaseChanges {
        let partitions = store.partitions
        var lsns = [UInt64](repeating: 0, count: partitions.count)
        if let token {
            let p = try token.databasePosition()
            guard p.store == store.fingerprint else { throw CloudletError.invalid("the change token belongs to another store") }
            guard p.database == Fingerprint.of(id) else { throw CloudletError.invalid("the change token belongs to another database") }
            guard p.lsns.count == partitions.count else { throw CloudletError.invalid("the change token is malformed") }
            lsns = p.lsns
        }
        let shares = store.catalog.snapshot().shares
        var changed: [ZoneID] = []
        var deleted: [ZoneID] = []
        let events = (shares.access[id.owner] ?? [:]).filter { $0.key.container == id.container && $0.key.environment == id.environment }
        for (key, event) in events.sorted(by: { ($0.key.owner, $0.key.zoneName) < ($1.key.owner, $1.key.zoneName) }) {
            let partition = store.partition(for: key)
            let pi = partitions.firstIndex { $0 === partition }!
            let since = lsns[pi]
            let visible = shares.shares(in: key).values.contains { $0.permission(of: id.owner) != .none }
            if visible {
                let last = partition.state.withLock { $0.zone(key)?.lastChangeLSN }
                guard let last else { continue }
                if token == nil || last > since || event.lsn >= since { changed.append(key.zoneID) }
            } else if token != nil && event.lsn >= since {
                deleted.append(key.zoneID)
            }
        }
        var next = lsns
        for (pi, p) in partitions.enumerated() {
            next[pi] = p.state.withLock { $0.lastLSN }
            try await p.waitDurable(min(next[pi], p.log.lastLSN))
        }
        let horizons = partitions.map { p in p.state.withLock { $0.purgedThroughLSN } }
        let t = ChangeToken(
            ChangeToken.DatabasePosition(store: store.fingerprint, database: Fingerprint.of(id), lsns: next, horizons: horizons))
        return DatabaseChanges(changedZones: changed, deletedZones: deleted, token: t, moreComing: false)
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
