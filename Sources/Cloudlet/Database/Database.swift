import CloudletCore
import Foundation

/// One database of a container: the public one, or a user's private or shared one. Holds zones; zones hold records.
///
/// Every method is `async`, validates its input before anything is written, and returns only after what it
/// wrote is durable (per the store's ``StoreConfiguration/durability``).
public struct Database: CloudletDatabase {
    public let id: DatabaseID
    public var scope: DatabaseScope { id.scope }
    /// Who reads and writes through this handle; every call is checked against it (``authorize(_:)``).
    public let access: AccessContext
    /// The name recorded in `created` / `modified` and whose notifications ``notifications(after:limit:wait:)``
    /// reads: the caller's user, or `__defaultOwner__`.
    public var user: String { access.stampName }
    let store: CloudletStore

    /// What a call does, for ``authorize(_:)``.
    enum Action {
        case read, write, subscribe
    }

    /// The one access rule of the engine, checked by every public call before it touches anything: the public
    /// database is readable by anyone and writable by a user or a server key; a private or shared database only by
    /// its own user; subscriptions and notifications belong to a user. (Security roles refine the public rule.)
    /// - Throws: `authenticationRequired` without the identity the action needs; `permissionFailure` for another
    ///   user's database.
    func authorize(_ action: Action) throws {
        try store.checkOpen()
        switch id.scope {
        case .public:
            switch (action, access.caller) {
            case (.read, _), (.write, .user), (.write, .serverKey), (.subscribe, .user): return
            case (.write, .anonymous):
                throw CloudletError(.authenticationRequired, "writing to the public database needs a signed-in user")
            case (.subscribe, _):
                throw CloudletError(.authenticationRequired, "subscriptions and notifications belong to a signed-in user, not \(access)")
            }
        case .private, .shared:
            guard let user = access.userRecordName else {
                throw CloudletError(.authenticationRequired, "the \(id.scope.rawValue) database needs a signed-in user, not \(access)")
            }
            guard user == id.owner else {
                throw CloudletError(.permissionFailure, "\(access) cannot use the \(id.scope.rawValue) database of '\(id.owner)'")
            }
        }
    }

    /// At most this many operations in one ``modify(_:atomic:)`` call (CloudKit's limit).
    public static let maxOperationsPerBatch = CloudletLimits.operationsPerRequest

    // MARK: - Zones

    /// Resolves a zone ID of this database to its store key. The owner may be `__defaultOwner__` or the
    /// database's owner; anything else is another user's zone, which this database does not hold.
    func key(_ zoneID: ZoneID) throws -> ZoneKey {
        // Zones are keyed by their owner: in a shared database, another user's zone that one of their shares lets this
        // user see (``sharedKey(_:)``).
        if id.scope == .shared { return try sharedKey(zoneID) }
        guard zoneID.ownerName == defaultOwnerName || zoneID.ownerName == id.owner else {
            throw CloudletError(
                .zoneNotFound, "zone '\(zoneID.zoneName)' of owner '\(zoneID.ownerName)' is not in the \(id.scope.rawValue) database of '\(id.owner)'")
        }
        guard zoneID.zoneName.utf8.count <= Names.maxLength, !zoneID.zoneName.isEmpty else {
            throw CloudletError.invalid("zone name '\(zoneID.zoneName)' is invalid")
        }
        return ZoneKey(database: id, zoneName: zoneID.zoneName)
    }

    private func zone(_ zoneID: ZoneID) -> RecordZone {
        let id = ZoneID(zoneName: zoneID.zoneName, ownerName: self.id.scope == .shared ? zoneID.ownerName : self.id.owner)
        return RecordZone(id: id, capabilities: id.isDefault ? [] : [.fetchChanges, .atomic, .sharing, .zoneWideSharing])
    }

    /// Creates a custom zone (private databases only). Saving a zone that exists returns it unchanged.
    @discardableResult
    public func createZone(_ zoneID: ZoneID) async throws -> RecordZone {
        try authorize(.write)
        guard id.scope == .private else {
            throw CloudletError(.badDatabase, "custom zones can only be created in a private database, not in \(id.scope.rawValue)")
        }
        try Names.validateZoneName(zoneID.zoneName)
        let key = try key(zoneID)
        let partition = store.partition(for: key)
        let (_, lsn) = try await partition.commit(waitingForRoom: { st, _ in (st.zone(key) == nil ? [.createZone(key)] : [], ()) })
        if let lsn { try await partition.waitDurable(lsn) }
        return zone(zoneID)
    }

    /// The zones of this database: the default zone (public and private) and every custom zone, sorted by name.
    public func zones() async throws -> [RecordZone] {
        try authorize(.read)
        if id.scope == .shared { return sharedZoneKeys().map { zone($0.zoneID) } }
        var names: [String] = []
        for p in store.partitions {
            p.state.withLock { st in
                for key in st.zoneKeys(of: id) where key.zoneName != ZoneID.defaultZoneName {
                    names.append(key.zoneName)
                }
            }
        }
        let custom = names.sorted().map { zone(ZoneID(zoneName: $0)) }
        return id.scope == .shared ? custom : [zone(.default)] + custom
    }

    /// One zone. - Throws: ``CloudletError/Code/zoneNotFound``.
    public func zone(for zoneID: ZoneID) async throws -> RecordZone {
        try authorize(.read)
        try requireZone(try key(zoneID))
        return zone(zoneID)
    }

    /// Deletes a custom zone and every record in it. - Throws: ``CloudletError/Code/zoneNotFound``; the default zone
    /// cannot be deleted.
    public func deleteZone(_ zoneID: ZoneID) async throws {
        try authorize(.write)
        guard !zoneID.isDefault else { throw CloudletError.invalid("the default zone cannot be deleted") }
        guard id.scope != .shared else {
            throw CloudletError(.permissionFailure, "only its owner '\(zoneID.ownerName)' may delete shared zone '\(zoneID.zoneName)'")
        }
        let key = try key(zoneID)
        let partition = store.partition(for: key)
        // The zone's shares end with it: their records go with the zone, and the catalog's copy is staged after it.
        let catalog = store.catalog
        let hooks = store.testHooks
        let staging = StagedCatalogCommit()
        let (_, lsn) = try await partition.commit(
            waitingForRoom: { st, lsn -> ([Mutation], [Mutation]) in
                guard st.zone(key) != nil else { throw zoneNotFound(key) }
                let shares = catalog.stagedShares(in: key).values.sorted { $0.id.recordName < $1.id.recordName }
                let ended = shares.isEmpty ? [] : Self.catalogCopy(of: Self.ending(shares), saved: [], in: key, lsn: lsn)
                return ([.deleteZone(key, time: Int64((Date().timeIntervalSince1970 * 1000).rounded()))], ended)
            },
            staged: { ended, _ in staging.stage(ended, in: catalog, hooks: hooks) })
        if let lsn { try await partition.waitDurable(lsn) }
        try await staging.waitDurable(catalog)
    }

    func requireZone(_ key: ZoneKey) throws {
        if key.zoneName == ZoneID.defaultZoneName {
            guard id.scope != .shared else {
                throw CloudletError(.badDatabase, "the shared database has no default zone; use a shared zone")
            }
            return
        }
        let exists = store.partition(for: key).state.withLock { $0.zone(key) != nil }
        guard exists else { throw zoneNotFound(key) }
    }

    private func zoneNotFound(_ key: ZoneKey) -> CloudletError {
        CloudletError(.zoneNotFound, "zone '\(key.zoneName)' does not exist in the \(id.scope.rawValue) database of \(id.container)")
    }

    // MARK: - Records

    /// Fetches a record. - Throws: ``CloudletError/Code/unknownItem`` if it does not exist,
    /// ``CloudletError/Code/zoneNotFound`` if its zone does not.
    public func record(for recordID: RecordID) async throws -> Record {
        let (key, entry) = try await liveEntry(recordID)
        return try await store.partition(for: key).read(key, recordID.recordName, entry)
    }

    /// The key directory's entry of a record that exists. - Throws: `unknownItem`, `zoneNotFound`.
    func liveEntry(_ recordID: RecordID) async throws -> (ZoneKey, RecordEntry) {
        try authorize(.read)
        let key = try key(recordID.zoneID)
        if key.zoneName == ZoneID.defaultZoneName { try requireZone(key) }  // the shared database has none
        guard let inZone = try await store.partition(for: key).currentEntry(key, recordID.recordName) else {
            throw zoneNotFound(key)
        }
        guard let entry = inZone, !entry.deleted else { throw unknownItem(recordID.recordName, key) }
        try requireReadable(recordID.recordName, recordType: entry.recordType, creator: entry.created?.userRecordName, in: security)
        if id.scope == .shared {
            var memo: [String: Share.Permission] = [:]
            guard let shared = sharedZone(key), try await sharedPermission(shared, of: recordID.recordName, memo: &memo) != .none else {
                throw unknownItem(recordID.recordName, key)
            }
        }
        return (key, entry)
    }

    private func unknownItem(_ name: String, _ key: ZoneKey) -> CloudletError {
        CloudletError(.unknownItem, "record '\(name)' does not exist in zone '\(key.zoneName)'")
    }

    /// ``liveEntry(_:)`` of several records, one result per ID, in order: each an entry, or the error
    /// that ID gets (`unknownItem`, `zoneNotFound`, an invalid zone, no access). Each zone's entries are looked up
    /// together (``Partition/currentEntries(_:_:)``: the zone's existence and its entries as of one moment, and the
    /// disk, if it must be read, read off the cooperative pool).
    private func liveEntries(_ recordIDs: [RecordID]) async throws -> [Result<(ZoneKey, RecordEntry), CloudletError>] {
        var out = [Result<(ZoneKey, RecordEntry), CloudletError>?](repeating: nil, count: recordIDs.count)
        let (zones, byZone) = try zonesOf(recordIDs, failing: &out)
        let security = self.security
        for key in zones {
            let items = byZone[key]!
            let found: Result<ZoneEntries?, any Error>
            do { found = .success(try await entries(key, items, recordIDs)) } catch { found = .failure(error) }
            try judge(key, items, found, recordIDs, security: security, into: &out)
        }
        return out.map { $0! }
    }

    /// The entries of records `items` of zone `key` and whether the caller may see each (the shared database's
    /// check; nil: all), or nil when the zone does not exist.
    private typealias ZoneEntries = (found: [RecordEntry?], visible: [Bool]?)

    private func entries(_ key: ZoneKey, _ items: [Int], _ recordIDs: [RecordID]) async throws -> ZoneEntries? {
        guard let found = try await store.partition(for: key).currentEntries(key, items.map { recordIDs[$0].recordName }) else { return nil }
        guard id.scope == .shared else { return (found, nil) }
        var visible = [Bool](repeating: true, count: items.count)
        let shared = sharedZone(key)
        var memo: [String: Share.Permission] = [:]
        for (j, (i, entry)) in zip(items, found).enumerated() where entry.map({ !$0.deleted }) ?? false {
            visible[j] = false
            if let shared { visible[j] = try await sharedPermission(shared, of: recordIDs[i].recordName, memo: &memo) != .none }
        }
        return (found, visible)
    }

    /// ``liveEntries(_:)`` without suspending, for a thread that may block (a front-end worker): the same checks
    /// and answers, the entries looked up under the partitions' locks (from the entry cache, or the key directory,
    /// which may read the disk). nil in the shared database, whose visibility checks are async: call
    /// ``liveEntries(_:)`` there.
    private func liveEntriesBlocking(_ recordIDs: [RecordID]) throws -> [Result<(ZoneKey, RecordEntry), CloudletError>]? {
        guard id.scope != .shared else { return nil }
        var out = [Result<(ZoneKey, RecordEntry), CloudletError>?](repeating: nil, count: recordIDs.count)
        let (zones, byZone) = try zonesOf(recordIDs, failing: &out)
        let security = self.security
        for key in zones {
            let items = byZone[key]!
            let found = Result<ZoneEntries?, any Error> {
                try store.partition(for: key).currentEntriesBlocking(key, items.map { recordIDs[$0].recordName }).map { ($0, nil) }
            }
            try judge(key, items, found, recordIDs, security: security, into: &out)
        }
        return out.map { $0! }
    }

    /// The first step of ``liveEntries(_:)``: each ID's zone, checked (access, the zone ID, the default zone's
    /// existence), grouped by zone in the order zones first appear. An ID that fails a check gets its error in `out`.
    private func zonesOf(
        _ recordIDs: [RecordID], failing out: inout [Result<(ZoneKey, RecordEntry), CloudletError>?]
    ) throws -> (zones: [ZoneKey], byZone: [ZoneKey: [Int]]) {
        var byZone: [ZoneKey: [Int]] = [:]
        var zones: [ZoneKey] = []
        for (i, rid) in recordIDs.enumerated() {
            do {
                try authorize(.read)
                let key = try key(rid.zoneID)
                if key.zoneName == ZoneID.defaultZoneName { try requireZone(key) }  // the shared database has none
                if byZone[key] == nil { zones.append(key) }
                byZone[key, default: []].append(i)
            } catch let e as CloudletError { out[i] = .failure(e) }
        }
        return (zones, byZone)
    }

    /// The last step of ``liveEntries(_:)`` for one zone: the result of each of its IDs (`items`) from what was
    /// `found` — the entry, or `unknownItem` for none, a tombstone or a record the caller may not see, or what the
    /// public database's security roles say; `zoneNotFound` for every ID when the zone does not exist, or the error
    /// the lookup failed with (an error other than a ``CloudletError`` is thrown).
    private func judge(
        _ key: ZoneKey, _ items: [Int], _ found: Result<ZoneEntries?, any Error>, _ recordIDs: [RecordID], security: SecurityCatalog?,
        into out: inout [Result<(ZoneKey, RecordEntry), CloudletError>?]
    ) throws {
        do {
            guard let (entries, visible) = try found.get() else { throw zoneNotFound(key) }
            for (j, (i, entry)) in zip(items, entries).enumerated() {
                if let entry, !entry.deleted, visible?[j] ?? true {
                    do {
                        try requireReadable(
                            recordIDs[i].recordName, recordType: entry.recordType, creator: entry.created?.userRecordName, in: security)
                        out[i] = .success((key, entry))
                    } catch let e as CloudletError { out[i] = .failure(e) }
                } else {
                    out[i] = .failure(unknownItem(recordIDs[i].recordName, key))
                }
            }
        } catch let e as CloudletError { for i in items { out[i] = .failure(e) } }
    }

    /// Fetches several records; one result per ID, in order.
    ///
    /// With `maxBytes` (a response's byte budget, counted as stored record sizes), a record that would take the
    /// records read past it is not read: its result is ``CloudletError/Code/limitExceeded`` ("fetch it in another
    /// request"). The first record found is always read, however large.
    public func records(for recordIDs: [RecordID]) async throws -> [Result<Record, CloudletError>] {
        try await records(for: recordIDs, maxBytes: nil)
    }

    /// ``records(for:)`` within a byte budget (see below). The records of each partition are read together
    /// (``Partition/read(_:)``): those close to each other in its log with one read.
    public func records(for recordIDs: [RecordID], maxBytes: Int?) async throws -> [Result<Record, CloudletError>] {
        var (out, reads) = try planReads(recordIDs, try await liveEntries(recordIDs), maxBytes: maxBytes)
        for (p, items) in reads.values {
            for (item, result) in zip(items, try await p.read(items.map { ($0.zone, $0.name, $0.entry) })) {
                out[item.at] = result
            }
        }
        return out.map { $0! }
    }

    /// ``records(for:maxBytes:)`` without an async hop, for a thread that may block (a front-end worker): the same
    /// checks and answers (access, zones, deleted records, the byte budget, security roles), from the caches when
    /// they hold what is asked for, else read from the disk right here. nil when the answer has to wait — a version
    /// not yet durable, or the shared database, whose share checks are async —: call ``records(for:maxBytes:)``.
    @available(*, noasync, message: "may block the calling thread; async code calls records(for:maxBytes:)")
    public func recordsBlocking(for recordIDs: [RecordID], maxBytes: Int?) throws -> [Result<Record, CloudletError>]? {
        guard let entries = try liveEntriesBlocking(recordIDs) else { return nil }
        var (out, reads) = try planReads(recordIDs, entries, maxBytes: maxBytes)
        for (p, items) in reads.values {
            guard let read = p.readBlocking(items.map { ($0.zone, $0.name, $0.entry) }) else { return nil }
            for (item, result) in zip(items, read) { out[item.at] = result }
        }
        return out.map { $0! }
    }

    /// What ``records(for:maxBytes:)`` reads, by partition, within the byte budget, and the results known without
    /// reading (an ID without a live entry, or past the budget: `limitExceeded`).
    private func planReads(
        _ recordIDs: [RecordID], _ entries: [Result<(ZoneKey, RecordEntry), CloudletError>], maxBytes: Int?
    ) throws -> (
        out: [Result<Record, CloudletError>?],
        reads: [ObjectIdentifier: (partition: Partition, items: [(at: Int, zone: ZoneKey, name: String, entry: RecordEntry)])]
    ) {
        let budget = try Self.byteBudget(maxBytes)
        var spent = 0
        var out = [Result<Record, CloudletError>?](repeating: nil, count: recordIDs.count)
        var reads: [ObjectIdentifier: (partition: Partition, items: [(at: Int, zone: ZoneKey, name: String, entry: RecordEntry)])] = [:]
        for (i, rid) in recordIDs.enumerated() {
            do {
                let (key, entry) = try entries[i].get()
                let cost = entry.pageCost(rid.recordName)
                if spent > 0 && spent + cost > budget {
                    throw CloudletError(
                        .limitExceeded,
                        "record '\(rid.recordName)' would take the response past its \(budget)-byte budget; fetch it in another request")
                }
                spent += cost
                let p = store.partition(for: key)
                reads[ObjectIdentifier(p), default: (p, [])].items.append((i, key, rid.recordName, entry))
            } catch let e as CloudletError { out[i] = .failure(e) }
        }
        return (out, reads)
    }

    /// Applies operations in order with CloudKit's `records/modify` semantics and returns one result per
    /// operation, in request order.
    ///
    /// Operations in a custom zone with `atomic` are all or nothing: if one fails, it carries its error and every
    /// other operation of that zone fails with ``CloudletError/Code/batchRequestFailed``. In the default zone each
    /// operation succeeds or fails on its own.
    /// - Throws: ``CloudletError/Code/limitExceeded`` for more than 200 operations (nothing is applied).
    public func modify(_ operations: [RecordOperation], atomic: Bool = true) async throws -> [RecordResult] {
        try await modify(operations, atomic: atomic, assetRule: nil)
    }

    /// ``modify(_:atomic:)`` with each asset of each record saved checked by `assetRule` first (under the
    /// partition's writer lock: it must not block). An asset it rejects fails its operation with that error, as any
    /// other per-record failure. New assets (``AssetReference/init(contentsOfFile:)``, ``AssetReference/init(data:)``)
    /// are copied into the store before anything is committed, and every asset must be in the store.
    public func modify(
        _ operations: [RecordOperation], atomic: Bool = true, assetRule: AssetRule?
    ) async throws -> [RecordResult] {
        try await modify(operations, saving: [], atomic: atomic, assetRule: assetRule).records
    }

    /// ``modify(_:atomic:assetRule:)`` that also saves shares (private database): each share is committed in its
    /// zone's commit, after the zone's record operations — so a share and its root record saved together are one
    /// commit, both saved or neither, as in CloudKit. A share fails as ``saveShare(_:createShortGUID:)`` would; in an
    /// atomic zone, a failed share fails the zone's records (`batchRequestFailed`) and a failed record its shares.
    /// In a shared database, an operation deleting a share that grants the user something (`delete`, whose change tag
    /// is checked when given, or `forceDelete`) is the user leaving it (``deleteShare(_:)``), in the zone's commit
    /// with the other operations; the share grants nothing to the batch's later operations.
    /// Returns one result per operation and one per share, in order.
    public func modify(
        _ operations: [RecordOperation], saving shares: [ShareSave], atomic: Bool = true, assetRule: AssetRule? = nil
    ) async throws -> (records: [RecordResult], shares: [Result<Share, CloudletError>]) {
        try authorize(.write)
        guard operations.count <= Self.maxOperationsPerBatch else {
            throw CloudletError(
                .limitExceeded, "\(operations.count) operations in one request; the limit is \(Self.maxOperationsPerBatch)")
        }
        let prepared = try await store.prepareAssets(operations)
        defer { store.assets.unpin(prepared.pinned) }
        let operations = prepared.operations
        var results = [RecordResult?](repeating: nil, count: operations.count)
        var groups: [ZoneKey: [(Int, RecordOperation)]] = [:]
        var order: [ZoneKey] = []
        var zoneErrors: [ZoneKey: CloudletError] = [:]
        var lastZone: (ZoneID, ZoneKey)?
        for (i, op) in operations.enumerated() {
            do {
                let zoneID = op.recordID.zoneID
                let key: ZoneKey
                if let (z, k) = lastZone, z == zoneID { key = k } else {
                    key = try self.key(zoneID)
                    lastZone = (zoneID, key)
                }
                if groups[key] == nil {
                    if let e = zoneErrors[key] { throw e }
                    // The shared database has no default zone. A custom zone's existence is checked where the batch
                    // is planned, under the partition's lock (commitGroup), and only there: checking it here as well
                    // took that lock on the cooperative pool, where a save waited behind every writer's planning.
                    if key.zoneName == ZoneID.defaultZoneName {
                        do { try requireZone(key) } catch let e as CloudletError {
                            zoneErrors[key] = e
                            throw e
                        }
                    }
                    order.append(key)
                }
                groups[key, default: []].append((i, op))
            } catch let e as CloudletError {
                results[i] = .failed(op.recordID, e)
            }
        }
        var shareResults = [Result<Share, CloudletError>?](repeating: nil, count: shares.count)
        var shareGroups: [ZoneKey: [(Int, ShareSave)]] = [:]
        for (i, save) in shares.enumerated() {
            do {
                let key = try ownerShareZone(save.share.id)
                try Self.validateShare(save.share, owner: id.owner)
                if groups[key] == nil && shareGroups[key] == nil { order.append(key) }
                shareGroups[key, default: []].append((i, save))
            } catch let e as CloudletError { shareResults[i] = .failure(e) }
        }
        await store.testHooks.runBeforeModifyCommit()
        var waits: [(Partition, UInt64)] = []
        var stagings: [StagedCatalogCommit] = []
        for key in order {
            let staging = StagedCatalogCommit()
            // One zone's batch waits for its durability in its commit (one wake-up of the task, not two); with
            // several, each zone's commit goes on as soon as the previous one is staged, and all are awaited below.
            let (groupResults, groupShares, wait) = try await commitGroup(
                key, groups[key] ?? [], shares: shareGroups[key] ?? [], atomic: atomic, rejected: prepared.rejected,
                assetRule: assetRule, staging: staging, untilDurable: order.count == 1)
            for (i, r) in groupResults { results[i] = r }
            for (i, r) in groupShares { shareResults[i] = r }
            if let wait { waits.append(wait) }
            stagings.append(staging)
        }
        for (p, lsn) in waits { try await p.waitDurable(lsn) }
        for staging in stagings { try await staging.waitDurable(store.catalog) }
        return (results.map { $0! }, shareResults.map { $0! })
    }

    /// `share` (as staged) with `user` REMOVED: what their leaving it writes. - Throws: `unknownItem` when it grants
    /// them nothing (any more).
    static func left(_ share: Share?, by user: String, in key: ZoneKey, named name: String) throws -> Share {
        guard var s = share, s.permission(of: user) != .none, let i = s.participants.firstIndex(where: { $0.userRecordName == user }) else {
            throw CloudletError(.unknownItem, "share '\(name)' does not exist in zone '\(key.zoneName)'")
        }
        s.participants[i].acceptance = .removed
        return s
    }

    /// Plans and commits one zone's operations against a catalog snapshot taken under the partition's lock. When
    /// they need schema additions (development), those are committed to the catalog and awaited first — outside
    /// the lock, never under it — and the batch is planned again against a snapshot that has them (again if the
    /// catalog moved meanwhile, e.g. a concurrent reset).
    private func commitGroup(
        _ key: ZoneKey, _ ops: [(Int, RecordOperation)], shares: [(Int, ShareSave)], atomic: Bool, rejected: [Int: CloudletError],
        assetRule: AssetRule?, staging: StagedCatalogCommit, untilDurable: Bool
    ) async throws -> (
        [Int: RecordResult], [Int: Result<Share, CloudletError>], (Partition, UInt64)?
    ) {
        let partition = store.partition(for: key)
        let now = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        // The versions planning will read (updates merge fields; a replace keeps the creation stamp, which only entries
        // older than format 5 lack), read now, outside the writer lock.
        let reads = ops.compactMap { _, op -> (String, fields: Bool)? in
            switch BatchPlanner.currentVersionNeed(op) {
            case .nothing: nil
            // An asset rule reads the replaced version's field for an asset without a receipt.
            case .creationStamp where assetRule != nil && op.record?.fields.values.contains(where: { v in
                v.assets.contains { $0.receipt == nil }
            }) == true:
                (op.recordID.recordName, true)
            case .creationStamp: (op.recordID.recordName, false)
            case .fields: (op.recordID.recordName, true)
            }
        }
        let prefetched = reads.isEmpty ? Partition.Prefetched() : try await partition.prefetch(key, reads)
        for _ in 0..<8 {
            do {
                // What the planner looks up in the key directory, applying the commit need not look up again.
                let lookups = PlannedLookups(zone: key)
                let catalog = store.catalog
                let owner = id.owner
                let hooks = store.testHooks
                let stamp = RecordStamp(timestamp: now, userRecordName: user, deviceID: store.configuration.deviceID)
                let ((results, shareResults, _), lsn) = try await partition.commit(lookups: lookups, waitingForRoom: { st, lsn in
                    // The zone must exist as the batch is planned, under the writer lock: checked before that, a
                    // deletion of the zone committed in between let the batch write into it, bringing it back.
                    guard st.zoneExists(key) else {
                        let gone = zoneNotFound(key)
                        return ([], (
                            Dictionary(uniqueKeysWithValues: ops.map { ($0.0, RecordResult.failed($0.1.recordID, gone)) }),
                            Dictionary(uniqueKeysWithValues: shares.map { ($0.0, Result<Share, CloudletError>.failure(gone)) }),
                            Self.catalogCopy(of: ShareChanges(), saved: [], in: key, lsn: lsn)
                        ))
                    }
                    prefetched.seed(lookups, currentEpoch: partition.entryCache.epoch)
                    var planner = BatchPlanner(
                        state: st, lsn: lsn, zone: key, catalog: store.catalog.snapshot(), access: access,
                        deviceID: store.configuration.deviceID, now: now, lookups: lookups, assetRule: assetRule,
                        sharedUser: id.scope == .shared ? id.owner : nil,
                        read: { name, entry in
                            try prefetched.records[RecordCache.Key(entry)] ?? partition.readDurable(key, name, entry, retry: false)
                        })
                    var results = try planner.plan(ops, atomic: atomic, rejected: rejected)
                    // A share whose root (or record) the batch deletes ends in the same commit.
                    var changes = Self.sharesEnded(by: planner.mutations, in: key, catalog: catalog)
                    var mutations = planner.mutations
                    var deletedByBatch: Set<String> = []
                    if !changes.deletions.isEmpty {
                        for m in mutations { if case .deleteRecord(_, let name, _, _, _) = m { deletedByBatch.insert(name) } }
                    }
                    for name in changes.deletions where !deletedByBatch.contains(name) {
                        mutations.append(.deleteRecord(zone: key, recordName: name, recordType: Share.recordType, time: now, parent: nil))
                    }
                    // Shares left (a participant) or saved (the owner) with the records: after them, in the same commit.
                    var shareResults: [Int: Result<Share, CloudletError>] = [:]
                    if !shares.isEmpty || !planner.leaving.isEmpty {
                        var inZone = catalog.stagedShares(in: key)
                        var failure = atomic ? results.values.first(where: { $0.error != nil }).map { ($0.recordID.recordName, $0.error!) } : nil
                        for (i, name) in planner.leaving where failure == nil {
                            do {
                                var s = try Self.left(inZone[name], by: owner, in: key, named: name)
                                mutations.append(try Self.shareRecordMutation(&s, in: key, st: st, lsn: lsn, index: mutations.count, stamp: stamp))
                                inZone[name] = s
                                changes.puts.append(s)
                                changes.access.append((owner, gone: true))
                            } catch let e as CloudletError {
                                results[i] = .failed(results[i]!.recordID, e)
                                if atomic { failure = (name, e) }
                            }
                        }
                        for (i, save) in shares where failure == nil {
                            do {
                                let planned = try Self.plannedSave(
                                    save.share, createShortGUID: save.createShortGUID, owner: owner, key: key, inZone: inZone,
                                    exists: planner.existsAfterPlan)
                                var s = planned.puts[0]
                                if inZone[s.id.recordName] == nil, try planner.existsAfterPlan(s.id.recordName) {
                                    throw CloudletError(
                                        .recordExists, "record '\(s.id.recordName)' exists in zone '\(key.zoneName)': a share cannot take its name")
                                }
                                mutations.append(try Self.shareRecordMutation(&s, in: key, st: st, lsn: lsn, index: mutations.count, stamp: stamp))
                                inZone[s.id.recordName] = s
                                changes.puts.append(s)
                                changes.access += planned.access
                                shareResults[i] = .success(s)
                            } catch let e as CloudletError {
                                shareResults[i] = .failure(e)
                                if atomic { failure = (save.share.id.recordName, e) }
                            }
                        }
                        if let (name, e) = failure {
                            // The zone's batch is all or nothing: nothing of it is written.
                            let failed = CloudletError(
                                .batchRequestFailed, "the atomic batch of zone '\(key.zoneName)' failed because '\(name)' failed (\(e.message))")
                            mutations = []
                            changes = ShareChanges()
                            for (i, r) in results where r.error == nil { results[i] = .failed(r.recordID, failed) }
                            for (i, _) in shares where (try? shareResults[i]?.get()) != nil || shareResults[i] == nil {
                                shareResults[i] = .failure(failed)
                            }
                        }
                    }
                    return (mutations, (results, shareResults, Self.catalogCopy(of: changes, saved: changes.puts, in: key, lsn: lsn)))
                }, staged: { planned, _ in staging.stage(planned.2, in: catalog, hooks: hooks) }, untilDurable: untilDurable)
                return (results, shareResults, lsn.map { (partition, $0) })
            } catch let needs as BatchPlanner.NeedsSchema {
                try await store.addSchema(needs.mutations)
            }
        }
        throw CloudletError(.internalError, "schema for zone '\(key.zoneName)' kept changing; retry the request")
    }
}
