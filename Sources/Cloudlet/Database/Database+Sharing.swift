import CloudletCore
import Foundation

/// Shares in the engine (docs/sharing.md): saving and deleting them, their participants, resolving and accepting them by
/// short GUID. What a participant may do in their shared database is in `Database+SharedDatabase.swift`.
extension Database {
    // MARK: - Shares (owner)

    /// Creates or replaces a share of this private database's user. A new share (``Share/changeTag`` nil) must not
    /// exist yet; a replacement carries the change tag it read. Participants keep their acceptance (new ones are
    /// PENDING, and one REMOVED listed as anything else is invited again); a participant left out, or listed as
    /// REMOVED, stays in the share as REMOVED (as CloudKit keeps them) and loses access. With `createShortGUID` the
    /// share gets a short GUID (kept once given).
    /// - Throws: `badDatabase` outside a private database or in the default zone; `zoneNotFound`; `unknownItem` for a
    ///   missing root; `recordExists` for a new share that exists, or a root (or zone) already shared;
    ///   `serverRecordChanged` for a stale change tag; `limitExceeded` past 100 participants; `invalidArguments` for
    ///   participants edited while the public permission is not NONE, or a malformed participant.
    @discardableResult
    public func saveShare(_ share: Share, createShortGUID: Bool = true) async throws -> Share {
        try authorize(.write)
        let key = try ownerShareZone(share.id)
        try Self.validateShare(share, owner: id.owner)
        if let root = share.rootRecordName { _ = try await liveEntry(RecordID(recordName: root, zoneID: share.id.zoneID)) }
        let owner = id.owner
        let (_, saved) = try await commitShares(key) { inZone, st -> (ShareChanges, Void) in
            let planned = try Self.plannedSave(share, createShortGUID: createShortGUID, owner: owner, key: key, inZone: inZone) { name in
                guard let e = try st.entry(key, name) else { return false }
                return !e.deleted
            }
            return (planned, ())
        }
        return saved[0]
    }

    /// What saving `share` (validated: ``validateShare(_:owner:)``) in zone `key` changes, given the zone's shares
    /// `inZone` as staged and whether a record exists (`exists`, for the root): the share to write and the accesses it
    /// ends. The one rule of a share save, for ``saveShare(_:createShortGUID:)`` and for a share saved with its root in
    /// one ``modify(_:shares:atomic:assetRule:)``.
    static func plannedSave(
        _ share: Share, createShortGUID: Bool, owner: String, key: ZoneKey, inZone: [String: Share], exists: (String) throws -> Bool
    ) throws -> ShareChanges {
        if let root = share.rootRecordName, try !exists(root) {
            throw CloudletError(.unknownItem, "record '\(root)' does not exist in zone '\(key.zoneName)'")
        }
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
        next.participants = Self.mergedParticipants(share.participants, previous: previous)
        let active = next.participants.filter { $0.acceptance != .removed }
        guard active.count < Share.maxParticipants else {
            throw CloudletError(.limitExceeded, "a share has at most \(Share.maxParticipants) participants, the owner included")
        }
        func invited(_ ps: [Share.Participant]) -> [String] {
            ps.filter { $0.type == .user && $0.acceptance != .removed }.map(\.userRecordName).sorted()
        }
        if old != nil, old!.publicPermission != .none, share.publicPermission != .none, invited(next.participants) != invited(previous) {
            throw CloudletError.invalid("participants can be edited only while the share's publicPermission is NONE")
        }
        next.shortGUID = old?.shortGUID ?? (createShortGUID ? Self.newShortGUID() : nil)
        var changes = ShareChanges(puts: [next])
        for p in previous where p.acceptance == .accepted && next.permission(of: p.userRecordName) == .none {
            changes.access.append((p.userRecordName, gone: true))
        }
        return changes
    }

    /// Checks what a share saved by `owner` may be without looking at the store: its name, kind and participants.
    static func validateShare(_ share: Share, owner: String) throws {
        if share.rootRecordName != nil {
            guard share.id.recordName != Share.zoneWideShareName else {
                throw CloudletError.invalid("a share named '\(Share.zoneWideShareName)' is zone-wide; it has no root record")
            }
        } else if share.id.recordName != Share.zoneWideShareName {
            throw CloudletError.invalid("a zone-wide share is named '\(Share.zoneWideShareName)', not '\(share.id.recordName)'")
        }
        try Names.validateRecordName(share.id.recordName)
        var seen: Set<String> = []
        for p in share.participants {
            try Names.validateUser(p.userRecordName)
            guard p.userRecordName != owner, p.type != .owner else {
                throw CloudletError.invalid("the owner '\(owner)' is not listed among the participants of their share")
            }
            guard seen.insert(p.userRecordName).inserted else {
                throw CloudletError.invalid("participant '\(p.userRecordName)' is listed twice")
            }
        }
    }

    /// The participants of a share saved with `listed` over `previous`: acceptance is the participant's to give, so a
    /// listed participant keeps theirs (new ones are PENDING); the owner can only invite again one who left or was
    /// removed (listed as anything but REMOVED), or remove one (listed as REMOVED, or left out: kept as REMOVED).
    static func mergedParticipants(_ listed: [Share.Participant], previous: [Share.Participant]) -> [Share.Participant] {
        var out = listed.map { p in
            var p = p
            if let before = previous.first(where: { $0.userRecordName == p.userRecordName }) {
                p.type = before.type
                p.acceptance = p.acceptance == .removed ? .removed : before.acceptance == .removed ? .pending : before.acceptance
            } else {
                p.type = .user
                p.acceptance = .pending
            }
            return p
        }
        let names = Set(listed.map(\.userRecordName))
        for var p in previous where !names.contains(p.userRecordName) {
            p.acceptance = .removed
            out.append(p)
        }
        return out
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
        let user = id.owner, leaving = id.scope == .shared
        _ = try await commitShares(key) { inZone, _ -> (ShareChanges, Void) in
            if leaving {
                let s = try Self.left(inZone[shareID.recordName], by: user, in: key, named: shareID.recordName)
                return (ShareChanges(puts: [s], access: [(user, gone: true)]), ())
            }
            guard let s = inZone[shareID.recordName] else {
                throw CloudletError(.unknownItem, "share '\(shareID.recordName)' does not exist in zone '\(key.zoneName)'")
            }
            return (Self.ending([s]), ())
        }
    }

    /// What ending `shares` for everyone changes: their records deleted, every accepted participant's access gone.
    static func ending(_ shares: [Share]) -> ShareChanges {
        var changes = ShareChanges(deletions: shares.map(\.id.recordName))
        for s in shares { changes.access += s.participants.filter { $0.acceptance == .accepted }.map { ($0.userRecordName, gone: true) } }
        return changes
    }

    /// The zone of a share of this private database's user. - Throws: `badDatabase` elsewhere or in the default zone.
    func ownerShareZone(_ shareID: RecordID) throws -> ZoneKey {
        guard id.scope == .private else {
            throw CloudletError(.badDatabase, "shares are saved in a custom zone of their owner's private database, not in the \(id.scope.rawValue) database")
        }
        guard id.owner != defaultOwnerName else {
            throw CloudletError(
                .badDatabase, "the embedding application's own database ('\(defaultOwnerName)') cannot be shared; share as a signed-in user")
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
        let (current, saved) = try await commitShares(key) { inZone, _ -> (ShareChanges, Share) in
            guard var s = inZone.values.first(where: { $0.shortGUID == shortGUID }) else {
                throw CloudletError(.unknownItem, "no share has short GUID '\(shortGUID)'")
            }
            if user == s.owner { return (ShareChanges(), s) }
            if let i = s.participants.firstIndex(where: { $0.userRecordName == user }) {
                switch s.participants[i].acceptance {
                case .accepted: return (ShareChanges(), s)
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
            return (ShareChanges(puts: [s], access: [(user, gone: false)]), s)
        }
        let accepted = saved.first ?? current
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

extension CloudletStore {
    /// The container and environment of the share a short GUID names (what its URL leads to), if any.
    public func shareLocation(shortGUID: String) -> (container: String, environment: CloudletCore.Environment)? {
        catalog.snapshot().shares.share(guid: shortGUID).map { ($0.zone.container, $0.zone.environment) }
    }
}
