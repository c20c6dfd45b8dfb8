import CloudletCore

/// What a shared database's user may do in one zone shared with them: the zone's shares that grant them something.
/// Every shared-database call goes through one of these (``Database/sharedZone(_:)``, and the batch planner's for
/// writes); private and public databases never build one.
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

    /// What `user` may do in `key` by the shares of `catalog`; nil when nothing.
    init?(key: ZoneKey, user: String, catalog: ShareCatalog) {
        let granting = catalog.shares(in: key).values.filter { $0.permission(of: user) != .none }
        guard !granting.isEmpty else { return nil }
        self.init(key: key, user: user, shares: granting.sorted { $0.id.recordName < $1.id.recordName })
    }

    /// Whether a record is covered by a share granting the user something by its name alone: a zone-wide share's
    /// record, a hierarchy share's root, or a share. A descendant of a root is covered through its parent chain
    /// (``permission(of:lookup:)``, ``Database/sharedPermission(_:name:parent:memo:)``).
    func covers(_ name: String) -> Bool { zoneWide || shares.contains { $0.covers(name) } }

    /// Whether some share is a hierarchy share (whose coverage follows parent chains).
    var followsParents: Bool { shares.contains { !$0.isZoneWide } }

    /// The best permission the shares covering `name` by its name give.
    func permission(_ name: String) -> Share.Permission {
        shares.filter { $0.covers(name) }.map { $0.permission(of: user) }.contains(.readWrite) ? .readWrite
            : covers(name) ? .readOnly : .none
    }

    /// What the record `name` is as of a write being planned: nil when it does not exist, else its parent's name.
    typealias Lookup = (String) throws -> String??

    /// The permission the user has on the existing record `name` as `lookup` sees the zone: that of a zone-wide share,
    /// else that of the first record up its parent chain (itself included) that a share covers by name. A record that
    /// does not exist, or whose chain passes one that does not, is covered by nothing.
    func permission(of name: String, lookup: Lookup) throws -> Share.Permission {
        if zoneWide { return permission(name) }
        var current = name
        for _ in 0...Database.maxParentDepth {
            guard let found = try lookup(current) else { return .none }
            if covers(current) { return permission(current) }
            guard let parent = found else { return .none }
            current = parent
        }
        return .none
    }

    /// Throws `permissionFailure` unless the user may apply `op` to the zone as `lookup` sees it (the batch planner's
    /// view, under the partition's writer lock, with the batch's earlier operations applied — so that the check and
    /// the write are one step, whatever commits or share changes race with it): a record that exists must be covered
    /// by a READ_WRITE share (by name or through its parent chain); a new one must be a zone-wide share's, or a child
    /// of an existing record so covered; a record given a new parent must stay within READ_WRITE shared records; a
    /// share is not written as a record; a share's root is created and deleted only by the owner.
    func check(_ op: RecordOperation, lookup: Lookup) throws {
        try checkNotShareOrRoot(op)
        let name = op.recordID.recordName
        let exists = try lookup(name) != nil
        if exists {
            try requireWritable(name, try permission(of: name, lookup: lookup))
        } else if !zoneWide && covers(name) {
            throw CloudletError(
                .permissionFailure, "record '\(name)' is the root of a share of '\(key.owner)', who alone may create it")
        }
        if let parent = op.record?.parent?.recordName {
            try requireWritable(name, try permission(of: parent, lookup: lookup))
        } else if !exists && !zoneWide {
            try requireWritable(name, .none)
        } else if exists && !covers(name), op.replacesWhole {
            // A replacement without a parent would take the record out of the share.
            throw CloudletError(
                .permissionFailure, "record '\(name)' is shared through its parent; saving it without one would take it out of the share")
        }
    }

    /// Throws `permissionFailure` for a share written as a record (deleting one that grants the user something is
    /// leaving it, which the batch planner takes before this check) and for the deletion of a share's root (only the
    /// owner's).
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
