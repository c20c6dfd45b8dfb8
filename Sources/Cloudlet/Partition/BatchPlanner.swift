import CloudletCore
import Foundation

/// Validates the operations of one zone against a partition's state and a catalog snapshot, and turns them into
/// mutations.
///
/// Runs under the partition's writer lock with the LSN its commit will get. Schema additions are never made here:
/// they go to the catalog first (``NeedsSchema``), outside the lock, and the batch is planned again. A commit
/// records the catalog version it was validated against when that is newer than the partition's
/// (``Mutation/catalogVersion(_:)``, last in the commit so that no record's index moves). Operations are applied in order, each
/// seeing the effect of the earlier ones (an overlay of the records this batch touched). In an atomic batch
/// (custom zone, `atomic` true) one failure fails everything: the failed operations carry their own error and
/// the rest `batchRequestFailed`, and no mutation is returned.
package struct BatchPlanner {
    /// Thrown (internally) when the commit needs schema additions that must first be committed to the catalog.
    package struct NeedsSchema: Error {
        package var mutations: [Mutation]

        package init(mutations: [Mutation]) { self.mutations = mutations }
    }

    package static let maxRecordSize = 1_000_000

    let state: PartitionState
    let lsn: UInt64
    let zone: ZoneKey
    let schema: SchemaCatalog
    /// The catalog version `schema` is from.
    let catalogVersion: UInt64
    /// Who the batch is for: stamped into `created` / `modified` and, in the public database, checked against
    /// the security roles (``SecurityCatalog``).
    let access: AccessContext
    var user: String { access.stampName }
    /// The roles and grants in force (checked in the public database only).
    let security: SecurityCatalog
    let deviceID: String
    let now: Int64
    /// Reads the current version of a record (prefetched outside the lock, cached, or from the log). Only operations
    /// that need its fields read it (and replaces of a version whose entry lacks its creation stamp); change tags,
    /// types and creation stamps come from the key directory.
    let read: (String, RecordEntry) throws -> Record
    /// Checks each asset of a record being saved (the server's receipts); nil: every asset is accepted.
    let assetRule: AssetRule?
    /// For a batch of a shared database's user: what the catalog's shares (as of this plan) let them do in the zone,
    /// nil inside when nothing (the share ended). nil outside for every other database. A share the batch leaves
    /// grants nothing to its later operations.
    private(set) var shared: SharedZone??
    /// The shares a shared database's user leaves in this batch (deleting one is leaving it), in request order: the
    /// commit writes each as the catalog stages it, with the user REMOVED (``Database/commitGroup``), after the records.
    private(set) var leaving: [(index: Int, name: String)] = []
    /// Whether a hierarchy share covers records of the zone through their parents: then a deletion keeps the deleted
    /// version's parent in its tombstone (``Mutation/deleteRecord(zone:recordName:recordType:time:parent:)``), for
    /// the participants' change feeds.
    let tombstonesKeepParents: Bool

    private(set) var mutations: [Mutation] = []
    /// The key directory's entries planning has looked up (the state does not change while it plans): an update
    /// checks the change tag and then reads the version, and a reference check may look a record up again. Handed
    /// on to the commit's apply (``PartitionState/apply(_:lsn:position:slots:costs:known:)``).
    let looked: PlannedLookups
    /// name → the version this batch has produced so far (nil: deleted by this batch).
    private var overlay: [String: Record?] = [:]
    private var schemaAdditions: [Mutation] = []

    init(
        state: PartitionState, lsn: UInt64, zone: ZoneKey, catalog: CatalogState, access: AccessContext, deviceID: String,
        now: Int64, lookups: PlannedLookups, assetRule: AssetRule? = nil, sharedUser: String? = nil,
        read: @escaping (String, RecordEntry) throws -> Record
    ) {
        shared = sharedUser.map { SharedZone(key: zone, user: $0, catalog: catalog.shares) }
        tombstonesKeepParents = catalog.shares.shares(in: zone).values.contains { !$0.isZoneWide }
        self.state = state
        self.lsn = lsn
        self.zone = zone
        self.schema = catalog.schema
        self.catalogVersion = catalog.version
        self.access = access
        self.security = catalog.security
        self.deviceID = deviceID
        self.now = now
        self.read = read
        self.assetRule = assetRule
        precondition(lookups.zone == zone, "the PlannedLookups of the planner's zone")
        looked = lookups
    }

    /// Plans `ops` (index in the request, operation); returns each one's result by request index. The operations
    /// in `rejected` fail with their error (assets that could not be made ready), as if planning had found it.
    mutating func plan(
        _ ops: [(Int, RecordOperation)], atomic: Bool, rejected: [Int: CloudletError] = [:]
    ) throws -> [Int: RecordResult] {
        var results: [Int: RecordResult] = [:]
        var firstFailure: (RecordID, CloudletError)?
        var seen: Set<String> = []
        // A batch's tables sized once: grown step by step, each doubling rehashed every name so far. (Not for a
        // single operation, where the first insertion allocates as much.)
        if ops.count > 1 {
            results.reserveCapacity(ops.count)
            seen.reserveCapacity(ops.count)
            overlay.reserveCapacity(ops.count)
            mutations.reserveCapacity(ops.count)
            looked.entries.reserveCapacity(looked.entries.count + ops.count)
        }
        for (index, op) in ops {
            let id = op.recordID
            do {
                guard seen.insert(id.recordName).inserted else {
                    throw CloudletError.invalid(
                        "record '\(id.recordName)' appears in more than one operation of this request")
                }
                if let e = rejected[index] { throw e }
                if try leaves(op) {
                    leaving.append((index, id.recordName))
                    results[index] = .deleted(zoneOwned(id))
                    continue
                }
                results[index] = try apply(op)
            } catch let e as CloudletError {
                results[index] = .failed(id, e)
                if firstFailure == nil { firstFailure = (id, e) }
            }
        }
        if let (failedID, failure) = firstFailure, atomic, !zone.zoneID.isDefault {
            mutations = []
            leaving = []
            for (index, op) in ops where results[index]?.error == nil {
                results[index] = .failed(
                    op.recordID,
                    CloudletError(
                        .batchRequestFailed,
                        "record '\(op.recordID.recordName)' was not saved: the atomic batch failed because "
                            + "record '\(failedID.recordName)' failed (\(failure.message))"))
            }
        } else if !schemaAdditions.isEmpty {
            throw NeedsSchema(mutations: schemaAdditions)
        }
        if !mutations.isEmpty && catalogVersion > state.catalogVersion { mutations.append(.catalogVersion(catalogVersion)) }
        return results
    }

    // MARK: - One operation

    private mutating func apply(_ op: RecordOperation) throws -> RecordResult {
        let name = op.recordID.recordName
        try Names.validateRecordName(name)
        try checkPermission(op)
        try checkShared(op)
        switch op {
        case .create(let r):
            if try version(name) != nil {
                throw CloudletError(
                    .recordExists, "record '\(name)' already exists in zone '\(zone.zoneName)'", serverRecord: try current(name))
            }
            return .saved(try put(r, fields: r.fields, replacing: nil))
        case .replace(let r):
            _ = try requireVersion(name, tag: r.changeTag, op: op)
            return .saved(try put(r, fields: r.fields, replacing: try previous(name)))
        case .update(let r):
            _ = try requireVersion(name, tag: r.changeTag, op: op)
            let existing = try current(name)!
            return .saved(
                try put(r, fields: existing.fields.merging(r.fields) { _, new in new }, parent: r.parent ?? existing.parent, replacing: Previous(existing)))
        case .forceUpdate(let r):
            let existing = try current(name)
            let fields = existing.map { $0.fields.merging(r.fields) { _, new in new } } ?? r.fields
            return .saved(try put(r, fields: fields, parent: r.parent ?? existing?.parent, replacing: existing.map(Previous.init)))
        case .forceReplace(let r):
            return .saved(try put(r, fields: r.fields, replacing: try previous(name)))
        case .delete(let id, let tag):
            try delete(id.recordName, type: try requireVersion(name, tag: tag, op: op).type)
            return .deleted(zoneOwned(id))
        case .forceDelete(let id):
            guard let existing = try version(name) else {
                throw CloudletError(.unknownItem, "record '\(name)' does not exist in zone '\(zone.zoneName)'")
            }
            try delete(id.recordName, type: existing.type)
            return .deleted(zoneOwned(id))
        }
    }

    /// In the public database, throws `permissionFailure` unless the caller's roles allow `op`: CREATE for a new
    /// record, WRITE (given who created it) to change or delete one. Checked before anything else about the record,
    /// so that a denied caller learns nothing more (no change-tag conflict, no server record).
    private func checkPermission(_ op: RecordOperation) throws {
        guard zone.ownerDatabase.scope == .public, !SecurityCatalog.isDeveloper(access) else { return }
        let name = op.recordID.recordName
        let (needed, type, creator): (RecordPermissions, String, String?)
        if case .create(let r) = op {
            (needed, type, creator) = (.create, r.recordType, nil)
        } else if let previous = try previous(name) {
            (needed, type, creator) = (.write, previous.type, previous.created?.userRecordName)
        } else if case .forceUpdate(let r) = op {
            (needed, type, creator) = (.create, r.recordType, nil)  // force-saving a record that does not exist
        } else if case .forceReplace(let r) = op {
            (needed, type, creator) = (.create, r.recordType, nil)
        } else {
            return  // changing or deleting a record that does not exist: unknownItem
        }
        guard !security.permissions(SchemaKey(zone: zone), recordType: type, for: access, creator: creator).contains(needed) else {
            return
        }
        let verb = needed == .create ? "create records" : "change or delete record '\(name)'"
        throw CloudletError(
            .permissionFailure, "\(access) may not \(verb) of type '\(type)' in the public database (no role grants it \(needed))")
    }

    /// In a shared database, throws unless the participant may apply `op` (``SharedZone/check(_:lookup:)``), as the
    /// zone stands with this batch's earlier operations: checked here, under the writer lock, against the shares this
    /// plan's catalog snapshot has, so that no share ending and no commit changing a parent chain can slip between the
    /// check and the write. A zone whose share ended meanwhile is `zoneNotFound`.
    private func checkShared(_ op: RecordOperation) throws {
        guard let shared else { return }
        guard let shared else {
            throw CloudletError(.zoneNotFound, "zone '\(zone.zoneName)' of owner '\(zone.owner)' is no longer shared with '\(user)'")
        }
        try shared.check(op) { name in try current(name).map { $0.parent?.recordName } }
    }

    /// Whether `op` is a shared database's user leaving a share: the deletion of a share that grants them something
    /// (checking a `delete`'s change tag, when it has one, against the share's record). The share then grants nothing
    /// to the batch's later operations.
    private mutating func leaves(_ op: RecordOperation) throws -> Bool {
        guard op.record == nil, case .some(.some(let zoneShares)) = shared else { return false }
        let name = op.recordID.recordName
        guard zoneShares.shares.contains(where: { $0.id.recordName == name }) else { return false }
        if case .delete(_, let tag) = op, !tag.isEmpty { _ = try requireVersion(name, tag: tag, op: op) }
        let rest = zoneShares.shares.filter { $0.id.recordName != name }
        shared = .some(rest.isEmpty ? nil : SharedZone(key: zone, user: zoneShares.user, shares: rest))
        return true
    }

    /// `id` in this zone as every other result names it: its owner is the database's owner (the user of a private
    /// database), not `__defaultOwner__` as a request may have said.
    private func zoneOwned(_ id: RecordID) -> RecordID { RecordID(recordName: id.recordName, zoneID: zone.zoneID) }

    /// What planning `op` needs of the record's current version, if it has one: what the caller may prefetch
    /// outside the lock (``Partition/prefetch(_:_:)``).
    static func currentVersionNeed(_ op: RecordOperation) -> CurrentVersionNeed {
        switch op {
        case .update, .forceUpdate: .fields
        case .replace, .forceReplace: .creationStamp
        case .create, .delete, .forceDelete: .nothing
        }
    }

    /// What an operation needs of the version it changes (``currentVersionNeed(_:)``).
    package enum CurrentVersionNeed {
        case nothing
        /// Its creation stamp: in its key-directory entry, unless the entry is older than store format 5.
        case creationStamp
        /// Its fields (an update merges them): a read of the version.
        case fields
    }

    /// What a new version takes from the one it replaces: the type, which must not change, and the creation stamp.
    fileprivate struct Previous {
        var type: String
        var created: RecordStamp?
    }

    /// The current version's type and creation stamp: this batch's if it touched the record, else from the key
    /// directory's entry — read from the version only for an entry written before entries kept the stamp.
    private func previous(_ name: String) throws -> Previous? {
        if let o = overlay[name] { return o.map(Previous.init) }
        guard let e = try entry(name), !e.deleted else { return nil }
        if let created = e.created { return Previous(type: e.recordType, created: created) }
        return Previous(try read(name, e))
    }

    /// The current version's type and change tag, from the key directory (or this batch): checks that need no read.
    private func version(_ name: String) throws -> (type: String, tag: String)? {
        if let o = overlay[name] { return o.map { ($0.recordType, $0.changeTag ?? "") } }
        guard let e = try entry(name), !e.deleted else { return nil }
        return (e.recordType, e.changeTag)
    }

    /// The current version, which must exist and carry change tag `tag`; the record is read only to go with a
    /// `serverRecordChanged` error.
    private func requireVersion(_ name: String, tag: String?, op: RecordOperation) throws -> (type: String, tag: String) {
        guard let tag, !tag.isEmpty else {
            throw CloudletError.invalid("\(op.operationType) of record '\(name)' needs its recordChangeTag")
        }
        guard let existing = try version(name) else {
            throw CloudletError(.unknownItem, "record '\(name)' does not exist in zone '\(zone.zoneName)'")
        }
        guard existing.tag == tag else {
            throw CloudletError(
                .serverRecordChanged,
                "record '\(name)' has changed on the server: change tag '\(tag)' is not the current '\(existing.tag)'",
                serverRecord: try current(name))
        }
        return existing
    }

    /// The current version of a record: this batch's if it touched it, else the partition's.
    private func current(_ name: String) throws -> Record? {
        if let o = overlay[name] { return o }
        guard let e = try entry(name), !e.deleted else { return nil }
        return try read(name, e)
    }

    private func exists(_ name: String) throws -> Bool { try version(name) != nil }

    /// Whether record `name` exists as the zone stands with this batch planned (a share saved with its root checks it).
    func existsAfterPlan(_ name: String) throws -> Bool { try exists(name) }

    /// The key directory's entry of `name` (as the partition has it, before this batch), looked up once.
    private func entry(_ name: String) throws -> RecordEntry? {
        if let known = looked.entries[name] { return known }
        let e = try state.entry(zone, name)
        looked.entries[name] = .some(e)
        return e
    }

    /// Validates and stages a new version of `input` with `fields`; `previous`: what the version it replaces
    /// hands on.
    private mutating func put(
        _ input: Record, fields: [String: FieldValue], parent: RecordID? = nil, replacing previous: Previous?
    ) throws -> Record {
        try Names.validateIdentifier(input.recordType, what: "record type")
        guard input.recordType != Share.recordType, previous?.type != Share.recordType else {
            throw CloudletError.invalid(
                "record '\(input.recordName)' is a share ('\(Share.recordType)'): save it as a share (saveShare, or a share operation), not as a record")
        }
        if let previous, previous.type != input.recordType {
            throw CloudletError.invalid(
                "record '\(input.recordName)' has type '\(previous.type)'; it cannot be saved as '\(input.recordType)'")
        }
        var record = Record(recordType: input.recordType, id: RecordID(recordName: input.recordName, zoneID: zone.zoneID))
        record.fields = fields
        // An update keeps the parent unless it names one; a create or replace sets it as given.
        if let parent = parent ?? input.parent {
            try Names.validateRecordName(parent.recordName)
            guard parent.recordName != input.recordName else {
                throw CloudletError.invalid("record '\(input.recordName)' cannot be its own parent")
            }
            record.parent = RecordID(recordName: parent.recordName, zoneID: zone.zoneID)
        }
        for (field, value) in fields {
            try Names.validateIdentifier(field, what: "field name")
            try value.validate(field: field)
            if !value.assets.isEmpty {
                if let assetRule {
                    // The replaced version's field, for an asset without a receipt (the rule may keep one it held).
                    let before = value.assets.contains { $0.receipt == nil } ? try current(input.recordName)?.fields[field] : nil
                    for asset in value.assets {
                        try assetRule(
                            AssetUse(
                                recordType: input.recordType, recordID: record.id, field: field, asset: asset, previous: before))
                    }
                }
                record.fields[field] = value.mappingAssets(\.stored)  // no receipt, no source
            }
            for ref in value.references {
                try Names.validateRecordName(ref.recordName)
                if try ref.action == .validate && ref.recordName != record.recordName && !exists(ref.recordName) {
                    throw CloudletError(
                        .referenceViolation,
                        "field '\(field)' of record '\(record.recordName)' has a VALIDATE reference to record "
                            + "'\(ref.recordName)', which does not exist in zone '\(zone.zoneName)'")
                }
            }
        }
        let additions = try schema.additions(for: record, in: SchemaKey(zone: zone), pending: schemaAdditions)
        let stamp = RecordStamp(timestamp: now, userRecordName: user, deviceID: deviceID)
        record.created = previous?.created ?? stamp
        record.modified = stamp
        record.changeTag = ChangeTag.make(lsn: lsn, index: mutations.count)
        // The size CloudKit limits is the record's data; ours is its whole encoding (fields plus the few bytes
        // of system fields), so nothing over the limit gets through.
        let encoded = RecordCodec.encode(record)
        guard encoded.count <= Self.maxRecordSize else {
            throw CloudletError(
                .limitExceeded,
                "record '\(record.recordName)' is \(encoded.count) bytes; the limit is \(Self.maxRecordSize) bytes")
        }
        schemaAdditions += additions
        mutations.append(.putRecord(zone: zone, record: record, encoded: encoded))
        overlay[record.recordName] = .some(record)
        return record
    }

    /// Stages the deletion of `name` and, transitively, of every live record that references a deleted one with
    /// DELETE_SELF.
    private mutating func delete(_ name: String, type: String) throws {
        var queue = [(name, type, try parentToKeep(name))]
        while let (target, targetType, parent) = queue.popLast() {
            mutations.append(.deleteRecord(zone: zone, recordName: target, recordType: targetType, time: now, parent: parent))
            overlay[target] = .some(nil)
            for source in try sources(referencing: target).sorted() where try exists(source) {
                let t: String
                if let o = overlay[source], let r = o { t = r.recordType } else { t = try entry(source)!.recordType }
                let p = try parentToKeep(source)
                overlay[source] = .some(nil)
                queue.append((source, t, p))
            }
        }
    }

    /// The parent a deletion of `name` keeps in its tombstone (``tombstonesKeepParents``): a read of the record, only
    /// in a zone with a hierarchy share.
    private func parentToKeep(_ name: String) throws -> String? {
        tombstonesKeepParents ? try current(name)?.parent?.recordName : nil
    }

    /// Live records whose current version references `target` with DELETE_SELF.
    private func sources(referencing target: String) throws -> Set<String> {
        var out: Set<String> = []
        for s in try state.keys.deleteSelfSources(in: zone, referencing: target) where overlay[s] == nil { out.insert(s) }
        for case (let name, .some(let record)) in overlay
        where record.fields.values.contains(where: { v in
            v.references.contains { $0.action == .deleteSelf && $0.recordName == target }
        }) {
            out.insert(name)
        }
        return out
    }
}

extension SchemaKey {
    package init(zone: ZoneKey) { self.init(container: zone.container, environment: zone.environment) }
}

extension BatchPlanner.Previous {
    /// What `record`, the version replaced, hands on.
    init(_ record: Record) { self.init(type: record.recordType, created: record.created) }
}
