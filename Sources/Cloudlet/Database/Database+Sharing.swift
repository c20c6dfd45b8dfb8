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

    /// Whether a record is covered by a share granting the user something by its name alone: a zone-wide share's
    /// record, a hierarchy share's root, or a share. A descendant of a root is covered through its parent chain
    /// (``Database/sharedPermission(_:name:parent:memo:)``).
    func covers(_ name: String) -> Bool { shares.contains { $0.covers(name) } }

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

    // MARK: - Shares (owner)

    /// Creates or replaces a share of this private database's user. A new share (``Share/changeTag`` nil) must not
    /// exist yet; a replacement carries the change tag it read. Participants keep their acceptance (new ones are
    /// PENDING, and one REMOVED listed as anything else is invited again); a participant left out is removed. With `createShortGUID` the share gets a short GUID (kept once
    /// given).
    /// - Throws: `badDatabase` outside a private database or in the default zone; `zoneNotFound`; `unknownItem` for a
    ///   missing root; `recordExists` for a new share that exists, or a root (or zone) already shared;
    ///   `serverRecordChanged` for a stale change tag; `limitExceeded` past 100 participants; `invalidArguments` for
    ///   participants edited while the public permission is not NONE, or a malformed participant.
    @discardableResult
    public func saveShare(_ share: Share, createShortGUID: Bool = true) async throws -> Share {
        try authorize(.write)
        let key = try ownerShareZone(share.id)
        if let root = share.rootRecordName {
            guard share.id.recordName != Share.zoneWideShareName else {
                throw CloudletError.invalid("a share named '\(Share.zoneWideShareName)' is zone-wide; it has no root record")
            }
            _ = try await liveEntry(RecordID(recordName: root, zoneID: share.id.zoneID))
        } else if share.id.recordName != Share.zoneWideShareName {
            throw CloudletError.invalid("a zone-wide share is named '\(Share.zoneWideShareName)', not '\(share.id.recordName)'")
        }
        try Names.validateRecordName(share.id.recordName)
        guard share.participants.count < Share.maxParticipants else {
            throw CloudletError(.limitExceeded, "a share has at most \(Share.maxParticipants) participants, the owner included")
        }
        var seen: Set<String> = []
        for p in share.participants {
            try Names.validateUser(p.userRecordName)
            guard p.userRecordName != id.owner, p.type != .owner else {
                throw CloudletError.invalid("the owner '\(id.owner)' is not listed among the participants of their share")
            }
            guard seen.insert(p.userRecordName).inserted else {
                throw CloudletError.invalid("participant '\(p.userRecordName)' is listed twice")
            }
        }
        let lsn = store.partition(for: key).state.withLock { $0.lastLSN }
        let owner = id.owner
        let (saved, version) = try await store.catalog.commit(waitingForRoom: { st -> ([Mutation], Share) in
            let inZone = st.shares.shares(in: key)
            let old = inZone[share.id.recordName]
            if let old {
                guard share.changeTag == old.changeTag else {
                    throw share.changeTag == nil
                        ? CloudletError(.recordExists, "share '\(share.id.recordName)' already exists in zone '\(key.zoneName)'")
                        : CloudletError(.serverRecordChanged, "share '\(share.id.recordName)' changed since it was read")
                }
                guard old.rootRecordName == share.rootRecordName else {
                    throw CloudletError.invalid("share '\(share.id.recordName)' cannot change its root record")
                }
            } else if share.changeTag != nil {
                throw CloudletError(.unknownItem, "share '\(share.id.recordName)' does not exist in zone '\(key.zoneName)'")
            }
            for other in inZone.values where other.id.recordName != share.id.recordName {
                if other.isZoneWide || share.isZoneWide || other.rootRecordName == share.rootRecordName {
                    throw CloudletError(
                        .recordExists,
                        share.isZoneWide
                            ? "zone '\(key.zoneName)' already has a share ('\(other.id.recordName)'); it cannot also be shared whole"
                            : "record '\(share.rootRecordName!)' is already shared (share '\(other.id.recordName)')")
                }
            }
            var next = share
            next.id = RecordID(recordName: share.id.recordName, zoneID: key.zoneID)
            next.owner = owner
            let previous = old?.participants ?? []
            let invited = previous.filter { $0.type == .user }.map(\.userRecordName).sorted()
            if old != nil, old!.publicPermission != .none, share.publicPermission != .none,
                share.participants.filter({ $0.type == .user }).map(\.userRecordName).sorted() != invited
            {
                throw CloudletError.invalid("participants can be edited only while the share's publicPermission is NONE")
            }
            next.participants = share.participants.map { p in
                var p = p
                let before = previous.first { $0.userRecordName == p.userRecordName }
                // Acceptance is the participant's to give; the owner can only invite again one who left or was removed.
                p.acceptance = before.map { $0.acceptance == .removed && p.acceptance != .removed ? .pending : $0.acceptance } ?? .pending
                if before == nil { p.type = .user }
                return p
            }
            next.shortGUID = old?.shortGUID ?? (createShortGUID ? Self.newShortGUID() : nil)
            next.changeTag = Self.newShareTag()
            var mutations: [Mutation] = [.security(.share(.put(key, next)))]
            for p in previous where p.acceptance == .accepted && next.permission(of: p.userRecordName) == .none {
                mutations.append(.security(.share(.access(key, user: p.userRecordName, lsn: lsn, gone: true))))
            }
            return (mutations, next)
        })
        try await store.catalog.waitDurable(version)
        return saved
    }

    /// The share named `recordID`: in a private database its owner's, in a shared database one the user accepted.
    /// - Throws: `unknownItem`; `zoneNotFound`.
    public func share(for recordID: RecordID) async throws -> Share {
        try authorize(.read)
        let key = try key(recordID.zoneID)
        let found = store.catalog.snapshot().shares.shares(in: key)[recordID.recordName]
        guard let found, id.scope != .shared || found.permission(of: id.owner) != .none else {
            throw CloudletError(.unknownItem, "share '\(recordID.recordName)' does not exist in zone '\(key.zoneName)'")
        }
        return found
    }

    /// The shares of a zone this handle may see, by record name.
    public func shares(in zoneID: ZoneID) async throws -> [Share] {
        try authorize(.read)
        let key = try key(zoneID)
        return store.catalog.snapshot().shares.shares(in: key).values
            .filter { id.scope != .shared || $0.permission(of: id.owner) != .none }.sorted { $0.id.recordName < $1.id.recordName }
    }

    /// Deletes a share. Its owner (private database) ends it for everyone; a participant (shared database) only
    /// leaves it (their acceptance becomes REMOVED).
    /// - Throws: `unknownItem`; `zoneNotFound`.
    public func deleteShare(_ shareID: RecordID) async throws {
        try authorize(.write)
        let key = try id.scope == .shared ? sharedKey(shareID.zoneID) : ownerShareZone(shareID)
        let lsn = store.partition(for: key).state.withLock { $0.lastLSN }
        let user = id.owner, leaving = id.scope == .shared
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st -> ([Mutation], Void) in
            guard var s = st.shares.shares(in: key)[shareID.recordName], !leaving || s.permission(of: user) != .none else {
                throw CloudletError(.unknownItem, "share '\(shareID.recordName)' does not exist in zone '\(key.zoneName)'")
            }
            if leaving {
                let i = s.participants.firstIndex { $0.userRecordName == user }!
                s.participants[i].acceptance = .removed
                s.changeTag = Self.newShareTag()
                return ([.security(.share(.put(key, s))), .security(.share(.access(key, user: user, lsn: lsn, gone: true)))], ())
            }
            return (Self.ending(s, in: key, lsn: lsn), ())
        })
        try await store.catalog.waitDurable(version)
    }

    /// The mutations that end share `s` of zone `key` for everyone.
    static func ending(_ s: Share, in key: ZoneKey, lsn: UInt64) -> [Mutation] {
        [.security(.share(.delete(key, recordName: s.id.recordName)))]
            + s.participants.filter { $0.acceptance == .accepted }.map {
                .security(.share(.access(key, user: $0.userRecordName, lsn: lsn, gone: true)))
            }
    }

    /// Ends the shares of zone `key` whose root is one of `roots` (every share of the zone when nil): the owner deleted
    /// those records, or the zone.
    func endShares(in key: ZoneKey, rootedAt roots: Set<String>?) async throws {
        guard !store.catalog.snapshot().shares.shares(in: key).isEmpty else { return }
        let lsn = store.partition(for: key).state.withLock { $0.lastLSN }
        let (_, version) = try await store.catalog.commit(waitingForRoom: { st -> ([Mutation], Void) in
            let ended = st.shares.shares(in: key).values.filter { s in roots.map { r in s.rootRecordName.map(r.contains) ?? false } ?? true }
            return (ended.flatMap { Self.ending($0, in: key, lsn: lsn) }, ())
        })
        try await store.catalog.waitDurable(version)
    }

    /// Ends the hierarchy shares of zone `key` whose root no longer exists (after deletions in the zone).
    func endSharesOfDeletedRoots(in key: ZoneKey) async throws {
        let roots = store.catalog.snapshot().shares.shares(in: key).values.compactMap(\.rootRecordName)
        guard !roots.isEmpty else { return }
        var gone: Set<String> = []
        let partition = store.partition(for: key)
        for (root, entry) in zip(roots, try await partition.currentEntries(key, roots) ?? []) where entry?.deleted ?? true {
            gone.insert(root)
        }
        if !gone.isEmpty { try await endShares(in: key, rootedAt: gone) }
    }

    /// The zone of a share of this private database's user. - Throws: `badDatabase` elsewhere or in the default zone.
    private func ownerShareZone(_ shareID: RecordID) throws -> ZoneKey {
        guard id.scope == .private else {
            throw CloudletError(.badDatabase, "shares are saved in a custom zone of their owner's private database, not in the \(id.scope.rawValue) database")
        }
        guard !shareID.zoneID.isDefault else {
            throw CloudletError(.badDatabase, "records of the default zone cannot be shared; share from a custom zone")
        }
        let key = try key(shareID.zoneID)
        try requireZone(key)
        return key
    }

    /// The share each of `records` (as this handle read or saved them) is the root of, by record ID: what a record
    /// dictionary's `share` names. Empty without a share in their zones (one catalog snapshot).
    public func rootShares(of records: [Record]) -> [RecordID: RecordID] {
        guard !records.isEmpty, id.scope != .public else { return [:] }
        let shares = store.catalog.snapshot().shares
        guard !shares.isEmpty else { return [:] }
        var out: [RecordID: RecordID] = [:]
        for r in records {
            let key = ZoneKey(container: id.container, environment: id.environment, owner: r.id.zoneID.ownerName, zoneName: r.id.zoneID.zoneName)
            if let s = shares.shares(in: key).values.first(where: { $0.rootRecordName == r.recordName }) { out[r.id] = s.id }
        }
        return out
    }

    // MARK: - Resolve and accept (any user)

    /// What the share a short GUID names is, for the caller: the share, their participant entry, and (with
    /// `fetchRootRecord`, when they may read it) its root record. The owner, a participant not removed, or anyone
    /// when the share has a public permission may resolve it.
    /// - Throws: `unknownItem` for an unknown GUID; `permissionFailure` for anyone else.
    public func resolveShare(shortGUID: String, fetchRootRecord: Bool = false) async throws -> ShareMetadata {
        try store.checkOpen()
        let (key, s) = try lookUpShare(shortGUID)
        let user = access.userRecordName
        let mine = user.flatMap { s.participant($0) }
        let isOwner = user == s.owner
        guard isOwner || (mine != nil && mine!.acceptance != .removed) || (s.publicPermission != .none && mine?.acceptance != .removed)
        else { throw CloudletError(.permissionFailure, "\(access) is not a participant of share '\(shortGUID)'") }
        var root: Record?
        if fetchRootRecord, let name = s.rootRecordName {
            let owner = Database(id: key.ownerDatabase, access: .user(s.owner), store: store)
            root = try? await owner.record(for: RecordID(recordName: name, zoneID: key.zoneID))
        }
        let me = isOwner ? Share.Participant(userRecordName: s.owner, type: .owner, permission: .readWrite, acceptance: .accepted) : mine
        return ShareMetadata(share: s, callerParticipant: me, rootRecord: root)
    }

    /// Accepts the share a short GUID names: an invited participant becomes ACCEPTED; with a public permission any
    /// signed-in user joins as a PUBLIC_USER with it. The share's zone then appears in the user's shared database.
    /// Accepting again changes nothing.
    /// - Throws: `authenticationRequired` without a signed-in user; `unknownItem` for an unknown GUID;
    ///   `permissionFailure` for a user neither invited nor let in by a public permission, or removed from the share.
    @discardableResult
    public func acceptShare(shortGUID: String) async throws -> ShareMetadata {
        try store.checkOpen()
        guard let user = access.userRecordName, user != defaultOwnerName else {
            throw CloudletError(.authenticationRequired, "accepting a share needs a signed-in user, not \(access)")
        }
        let (key, _) = try lookUpShare(shortGUID)
        let lsn = store.partition(for: key).state.withLock { $0.lastLSN }
        let (accepted, version) = try await store.catalog.commit(waitingForRoom: { st -> ([Mutation], Share) in
            guard let at = st.shares.byGUID[shortGUID], var s = st.shares.shares(in: at.zone)[at.name] else {
                throw CloudletError(.unknownItem, "no share has short GUID '\(shortGUID)'")
            }
            if user == s.owner { return ([], s) }
            if let i = s.participants.firstIndex(where: { $0.userRecordName == user }) {
                switch s.participants[i].acceptance {
                case .accepted: return ([], s)
                case .removed: throw CloudletError(.permissionFailure, "'\(user)' was removed from share '\(shortGUID)'")
                case .pending: s.participants[i].acceptance = .accepted
                }
            } else {
                guard s.publicPermission != .none else {
                    throw CloudletError(.permissionFailure, "'\(user)' is not invited to share '\(shortGUID)', and it is not public")
                }
                guard s.participants.count + 1 < Share.maxParticipants else {
                    throw CloudletError(.limitExceeded, "share '\(shortGUID)' has \(Share.maxParticipants) participants already")
                }
                s.participants.append(
                    Share.Participant(userRecordName: user, type: .publicUser, permission: s.publicPermission, acceptance: .accepted))
            }
            s.changeTag = Self.newShareTag()
            return ([.security(.share(.put(at.zone, s))), .security(.share(.access(at.zone, user: user, lsn: lsn, gone: false)))], s)
        })
        try await store.catalog.waitDurable(version)
        return ShareMetadata(share: accepted, callerParticipant: accepted.participant(user), rootRecord: nil)
    }

    private func lookUpShare(_ shortGUID: String) throws -> (ZoneKey, Share) {
        guard let found = store.catalog.snapshot().shares.share(guid: shortGUID),
            found.zone.container == id.container, found.zone.environment == id.environment
        else { throw CloudletError(.unknownItem, "no share has short GUID '\(shortGUID)'") }
        return found
    }

    /// 20 random characters of `[a-z0-9]`: a short GUID (about 103 bits).
    static func newShortGUID() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<20).map { _ in alphabet.randomElement()! })
    }

    static func newShareTag() -> String { String(UInt64.random(in: 1...UInt64.max), radix: 36) }
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
