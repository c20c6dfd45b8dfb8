import Cloudlet
import CloudletCore
import CloudletModel
import Foundation

/// Keeps an embedded store in sync with a remote database, offline first, in the shape of `CKSyncEngine`:
///
/// - the app reads the **local** database directly and writes through ``save(_:)`` / ``delete(_:)``, which write
///   the local record and queue the change durably in the local store itself (zone ``stateZone``), so a change
///   made offline survives restarts and crashes until the server has it;
/// - ``sendChanges()`` sends the queue in batches (a record known to the server is replaced against the change
///   tag this device last saw, so a concurrent edit elsewhere is a conflict, never silently overwritten);
///   conflicts go to the ``SyncConflictResolver`` with the local, server and ancestor copies;
/// - ``fetchChanges()`` reads the remote database's change feed (database feed → each changed zone's feed) from
///   the tokens it saved last time and applies it locally, skipping records with unsent local changes (those
///   meet the server's version as a conflict when sent);
/// - ``run(pollSeconds:)`` syncs whenever the server's notifications say something changed, and retries with
///   backoff while the server is unreachable.
///
/// The remote database must be private (the only one with a database change feed); the local one is the local
/// store's private database of any user. Zones are matched by name. One engine per local database.
public actor SyncEngine {
    /// The local zone holding the queue of unsent changes, the server change tag and last synced copy of each
    /// record, and the change tokens.
    public static let stateZone = ZoneID(zoneName: "cloudlet.sync")

    public let local: Database
    public let remote: any CloudletDatabase
    public let resolver: SyncConflictResolver
    /// Operations per `modify` sent to the server.
    public var batchSize = CloudletLimits.operationsPerRequest
    private var lastSequence: Int64 = 0
    /// Set while a send or fetch runs, so that they never interleave with each other.
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Opens the engine over a local and a remote database, creating the state zone locally if needed.
    public init(local: Database, remote: any CloudletDatabase, resolver: SyncConflictResolver = .serverWins) async throws {
        guard local.scope == .private else {
            throw CloudletError(.invalidArguments, "the sync engine's local database must be a private database")
        }
        guard remote.scope == .private else {
            throw CloudletError(.invalidArguments, "the sync engine syncs a private database (the one with a database change feed)")
        }
        self.local = local
        self.remote = remote
        self.resolver = resolver
        do { _ = try await local.zone(for: Self.stateZone) } catch let e as CloudletError where e.code == .zoneNotFound {
            _ = try await local.createZone(Self.stateZone)
        }
        try await registerStateTypes()
    }

    /// A query of a record type never saved is an error (CloudKit's schema rule), so each state record type is
    /// saved once, with the fields the engine queries, and deleted again.
    private func registerStateTypes() async throws {
        let samples = [
            Record(
                recordType: StateRecord.pending, id: Self.stateID("registering"),
                fields: ["seq": .int64(0), "op": .string(""), "zone": .string(""), "name": .string("")]),
            Record(
                recordType: StateRecord.synced, id: Self.stateID("registering"),
                fields: ["tag": .string(""), StateRecord.zoneField: .string("")]),
        ]
        for sample in samples {
            do { _ = try await local.count(Query(recordType: sample.recordType), zoneID: Self.stateZone) } catch let e
                as CloudletError where e.code == .invalidArguments
            {
                // Two calls: one call may not name a record twice.
                try await writeLocally([.forceReplace(sample)])
                try await writeLocally([.forceDelete(sample.id)])
            }
        }
    }

    // MARK: - Local changes

    /// Saves a record locally and queues it for the server. Its change tag is ignored: what the device last saw of
    /// the server's copy decides the check there. - Returns: the record as saved locally.
    @discardableResult
    public func save(_ record: Record) async throws -> Record {
        var r = record
        r.id.zoneID = ZoneID(zoneName: r.id.zoneID.zoneName)
        r.changeTag = nil
        try await ensureLocalZone(r.id.zoneID)
        // The queue entry first: if the process dies before the record is written, the change still reaches the
        // server and comes back by the change feed.
        try await queue(.save(r))
        let saved = try await local.modify([.forceReplace(r)], atomic: false)[0]
        if let e = saved.error { throw e }
        return saved.record!
    }

    /// Deletes a record locally and queues the deletion for the server.
    public func delete(_ recordID: RecordID) async throws {
        let id = RecordID(recordName: recordID.recordName, zoneID: ZoneID(zoneName: recordID.zoneID.zoneName))
        try await queue(.delete(id))
        try await writeLocally([.forceDelete(id)], tolerating: [.unknownItem, .zoneNotFound])
    }

    /// How many local changes the server does not have yet.
    public func pendingCount() async throws -> Int {
        try await local.count(Query(recordType: StateRecord.pending), zoneID: Self.stateZone)
    }

    // MARK: - Sync

    /// What one ``sync()`` did.
    public struct Report: Sendable, CustomStringConvertible {
        public var sent = 0
        public var fetched = 0
        public var conflicts = 0
        /// Changes the server refused for a reason other than a conflict (they stay queued), by record.
        public var failures: [RecordID: CloudletError] = [:]

        public var description: String {
            "sent \(sent), fetched \(fetched), conflicts \(conflicts), failures \(failures.count)"
        }
    }

    /// Sends the queue, then fetches the server's changes.
    @discardableResult
    public func sync() async throws -> Report {
        var report = try await sendChanges()
        let fetched = try await fetchChanges()
        report.fetched = fetched.fetched
        return report
    }

    /// Syncs, then listens to the server's notifications (``CloudletDatabase/notificationEvents(after:)``: a
    /// websocket through the client) and syncs again on each, until the calling task is cancelled. While the server
    /// cannot be reached it retries with backoff (up to 30 s); local changes keep queueing meanwhile. Saves a
    /// database subscription named `cloudlet-sync` on the server so that every change there notifies.
    public func run() async throws {
        var position: NotificationID?
        var subscribed = false
        var backoff = 0.2
        while !Task.isCancelled {
            do {
                if !subscribed {
                    _ = try await remote.saveSubscription(Subscription(id: "cloudlet-sync", kind: .database))
                    subscribed = true
                }
                if position == nil { position = try await remote.notifications(after: nil, limit: 0, wait: 0).next }
                try await sync()
                backoff = 0.2
                for try await event in remote.notificationEvents(after: position) {
                    if case .notification(let n) = event { position = n.id }
                    try await sync()
                }
            } catch is CancellationError {
                return
            } catch let e as CloudletError where e.code == .serviceUnavailable || e.code == .authenticationFailed {
                try? await Task.sleep(nanoseconds: UInt64(backoff * 1e9))
                backoff = min(backoff * 2, 30)
            }
        }
    }

    /// Sends every queued change, in the order made, in batches. - Throws: when the server cannot be reached
    /// (the queue is kept).
    @discardableResult
    public func sendChanges() async throws -> Report {
        await acquire()
        defer { release() }
        var report = Report()
        // A round resolves conflicts and creates missing zones; what they queue again goes in the next round.
        for _ in 0..<4 {
            let pending = try await allPending()
            if pending.isEmpty { break }
            var progressed = false
            for batch in pending.chunked(batchSize) {
                progressed = try await send(Array(batch), into: &report) || progressed
            }
            if !progressed { break }
        }
        return report
    }

    /// Applies the server's changes since the tokens saved last time.
    @discardableResult
    public func fetchChanges() async throws -> Report {
        await acquire()
        defer { release() }
        var report = Report()
        var dbToken = try await token(StateRecord.databaseTokenName)
        while true {
            let page: DatabaseChanges
            do { page = try await remote.databaseChanges(since: dbToken, resultsLimit: nil) } catch let e as CloudletError
                where e.code == .changeTokenExpired
            {
                dbToken = nil
                continue
            }
            for zone in page.changedZones.map({ ZoneID(zoneName: $0.zoneName) }) where zone != Self.stateZone {
                report.fetched += try await fetchZone(zone)
            }
            for zone in page.deletedZones.map({ ZoneID(zoneName: $0.zoneName) }) where zone != Self.stateZone {
                try await dropLocalZone(zone)
            }
            dbToken = page.token
            try await saveToken(StateRecord.databaseTokenName, page.token)
            if !page.moreComing { break }
        }
        return report
    }

    // MARK: - Sending

    /// One batch: returns whether anything was settled (sent, resolved, or a zone created for it).
    private func send(_ batch: [Pending], into report: inout Report) async throws -> Bool {
        var ops: [RecordOperation] = []
        var sentOf: [Int] = []  // index in batch of each op
        var settled = false
        for (i, p) in batch.enumerated() {
            switch p.change {
            case .save(var r):
                r.changeTag = p.serverTag
                ops.append(p.serverTag == nil ? .create(r) : .replace(r))
            case .delete(let id):
                guard let tag = p.serverTag else {
                    // The server never had it: nothing to send.
                    try await dropPending([p])
                    settled = true
                    continue
                }
                ops.append(.delete(id, changeTag: tag))
            }
            sentOf.append(i)
        }
        if ops.isEmpty { return settled }
        let results = try await remote.modify(ops, atomic: false)
        var done: [Pending] = []
        var synced: [(RecordID, Record?)] = []
        for (k, result) in results.enumerated() {
            let p = batch[sentOf[k]]
            switch result {
            case .saved(let server):
                done.append(p)
                synced.append((p.recordID, server))
                report.sent += 1
            case .deleted:
                done.append(p)
                synced.append((p.recordID, nil))
                report.sent += 1
            case .failed(_, let e):
                switch e.code {
                case .serverRecordChanged, .recordExists:
                    report.conflicts += 1
                    try await resolve(p, server: e.serverRecord)
                case .unknownItem:
                    // Deleted on the server.
                    if case .delete = p.change {
                        done.append(p)
                        synced.append((p.recordID, nil))
                    } else {
                        report.conflicts += 1
                        try await resolve(p, server: nil)
                    }
                case .zoneNotFound:
                    _ = try await remote.createZone(p.recordID.zoneID)
                default:
                    report.failures[p.recordID] = e
                    continue
                }
            }
            settled = true
        }
        try await recordSynced(synced)
        try await dropPending(done)
        return settled
    }

    /// Applies the resolver's decision on a conflict.
    private func resolve(_ p: Pending, server: Record?) async throws {
        let localRecord: Record? = if case .save(let r) = p.change { r } else { nil }
        let server = server.map(Self.localized)
        let conflict = SyncConflict(local: localRecord, server: server, ancestor: try await syncedCopy(p.recordID))
        switch resolver.resolve(conflict) {
        case .useServer:
            try await applyLocally(p.recordID, server)
            try await recordSynced([(p.recordID, server)])
            try await dropPending([p])
        case .save(var merged):
            merged.id = p.recordID
            try await recordSynced([(p.recordID, server)])
            try await requeue(p, .save(merged))
            try await applyLocally(p.recordID, merged)
        case .delete:
            try await recordSynced([(p.recordID, server)])
            try await requeue(p, .delete(p.recordID))
            try await applyLocally(p.recordID, nil)
        }
    }

    // MARK: - Fetching

    private func fetchZone(_ zone: ZoneID) async throws -> Int {
        try await ensureLocalZone(zone)
        let tokenName = StateRecord.zoneTokenPrefix + zone.zoneName
        var token = try await token(tokenName)
        var applied = 0
        while true {
            let page: ZoneChanges
            do {
                page = try await remote.zoneChanges(zone, since: token, resultsLimit: nil, desiredKeys: nil, desiredRecordTypes: nil)
            } catch let e as CloudletError where e.code == .changeTokenExpired {
                token = nil
                continue
            } catch let e as CloudletError where e.code == .zoneNotFound {
                return applied
            }
            let ids = page.changes.map { RecordID(recordName: $0.recordID.recordName, zoneID: zone) }
            let unsent = try await pendingKeys(for: ids)
            var localOps: [RecordOperation] = []
            var synced: [(RecordID, Record?)] = []
            for (change, id) in zip(page.changes, ids) where !unsent.contains(StateRecord.key(id)) {
                switch change {
                // A share (`cloudkit.share`) is the server's access control between its users, not data to copy.
                case .changed(let r) where r.recordType == Share.recordType: continue
                case .deleted(_, let type) where type == Share.recordType: continue
                case .changed(let r):
                    let copy = Self.localized(r)
                    var plain = copy
                    plain.changeTag = nil
                    localOps.append(.forceReplace(plain))
                    synced.append((id, copy))
                case .deleted:
                    localOps.append(.forceDelete(id))
                    synced.append((id, nil))
                }
            }
            try await writeLocally(localOps, tolerating: [.unknownItem])
            try await recordSynced(synced)
            applied += localOps.count
            token = page.token
            try await saveToken(tokenName, page.token)
            if !page.moreComing { break }
        }
        return applied
    }

    private func dropLocalZone(_ zone: ZoneID) async throws {
        if !zone.isDefault {
            do { try await local.deleteZone(zone) } catch let e as CloudletError where e.code == .zoneNotFound {}
        }
        try await deleteState([RecordID(recordName: StateRecord.zoneTokenPrefix + zone.zoneName, zoneID: Self.stateZone)])
        // The synced copies of its records go with it.
        var cursor: QueryCursor?
        repeat {
            let page = try await local.query(
                Query(
                    recordType: StateRecord.synced,
                    predicate: .comparison(Comparison(StateRecord.zoneField, .equals, .string(zone.zoneName)))),
                zoneID: Self.stateZone, continuationMarker: cursor)
            try await deleteState(page.records.map(\.id))
            cursor = page.cursor
        } while cursor != nil
    }

    // MARK: - State in the local store

    private enum Change: Sendable {
        case save(Record)
        case delete(RecordID)
    }

    /// A queued change, with the state record it was read from (whose change tag guards its removal) and the
    /// server change tag the change is based on.
    private struct Pending: Sendable {
        var recordID: RecordID
        var change: Change
        var sequence: Int64
        var entry: Record
        var serverTag: String?
    }

    /// The record types and names of the state zone.
    enum StateRecord {
        static let pending = "CloudletSyncPending"
        static let synced = "CloudletSyncRecord"
        static let token = "CloudletSyncToken"
        static let databaseTokenName = "database"
        static let zoneTokenPrefix = "zone:"
        static let zoneField = "zone"

        /// The state record name of a record: its zone's name, length first, then its own (unambiguous).
        static func key(_ id: RecordID) -> String { "\(id.zoneID.zoneName.utf8.count):\(id.zoneID.zoneName):\(id.recordName)" }
    }

    private func queue(_ change: Change) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1e6)
        lastSequence = max(now, lastSequence + 1)
        let id: RecordID
        var fields: [String: FieldValue] = ["seq": .int64(lastSequence)]
        switch change {
        case .save(let r):
            id = r.id
            fields["op"] = .string("save")
            fields["record"] = .bytes(RecordCodec.encode(r))
        case .delete(let rid):
            id = rid
            fields["op"] = .string("delete")
        }
        fields["zone"] = .string(id.zoneID.zoneName)
        fields["name"] = .string(id.recordName)
        let entry = Record(recordType: StateRecord.pending, recordName: StateRecord.key(id), zoneID: Self.stateZone, fields: fields)
        try await writeLocally([.forceReplace(entry)])
    }

    /// Queues `change` in place of `p` (a newer local change since `p` was read wins over it).
    private func requeue(_ p: Pending, _ change: Change) async throws {
        let current = try? await local.record(for: p.entry.id)
        guard current?.changeTag == p.entry.changeTag else { return }
        try await queue(change)
    }

    private func allPending() async throws -> [Pending] {
        var entries: [Record] = []
        var cursor: QueryCursor?
        repeat {
            let page = try await local.query(Query(recordType: StateRecord.pending), zoneID: Self.stateZone, continuationMarker: cursor)
            entries += page.records
            cursor = page.cursor
        } while cursor != nil
        var out: [Pending] = []
        for entry in entries {
            guard case .string(let zone)? = entry.fields["zone"], case .string(let name)? = entry.fields["name"],
                case .int64(let seq)? = entry.fields["seq"], case .string(let op)? = entry.fields["op"]
            else { throw CloudletError(.corruption, "sync queue entry '\(entry.recordName)' is malformed") }
            let id = RecordID(recordName: name, zoneID: ZoneID(zoneName: zone))
            let change: Change
            if op == "save", case .bytes(let bytes)? = entry.fields["record"] {
                var r = try RecordCodec.decode(bytes, zoneID: id.zoneID)
                r.id = id
                change = .save(r)
            } else {
                change = .delete(id)
            }
            out.append(Pending(recordID: id, change: change, sequence: seq, entry: entry, serverTag: nil))
        }
        out.sort { $0.sequence < $1.sequence }
        let synced = try await local.records(for: out.map { Self.syncedID($0.recordID) })
        for i in out.indices {
            if case .success(let s) = synced[i], case .string(let tag)? = s.fields["tag"] { out[i].serverTag = tag }
        }
        return out
    }

    /// Which of these records have unsent local changes (by state key).
    private func pendingKeys(for ids: [RecordID]) async throws -> Set<String> {
        var keys = Set<String>()
        for chunk in ids.chunked(CloudletLimits.lookupsPerRequest) {
            let found = try await local.records(for: chunk.map { Self.stateID(StateRecord.key($0)) })
            for r in found { if case .success(let e) = r, e.recordType == StateRecord.pending { keys.insert(e.recordName) } }
        }
        return keys
    }

    /// Removes queue entries that have not been replaced by a newer local change since they were read.
    private func dropPending(_ done: [Pending]) async throws {
        try await writeLocally(
            done.map { .delete($0.entry.id, changeTag: $0.entry.changeTag ?? "") }, tolerating: [.serverRecordChanged, .unknownItem])
    }

    /// Records the server's change tag and copy of each record (nil: the server has none).
    private func recordSynced(_ items: [(RecordID, Record?)]) async throws {
        var ops: [RecordOperation] = []
        for (id, server) in items {
            let stateID = Self.syncedID(id)
            guard let server, let tag = server.changeTag else {
                ops.append(.forceDelete(stateID))
                continue
            }
            var copy = server
            copy.changeTag = nil
            ops.append(
                .forceReplace(
                    Record(
                        recordType: StateRecord.synced, id: stateID,
                        fields: [
                            "tag": .string(tag), "record": .bytes(RecordCodec.encode(copy)),
                            StateRecord.zoneField: .string(id.zoneID.zoneName),
                        ])))
        }
        try await writeLocally(ops, tolerating: [.unknownItem])
    }

    private func syncedCopy(_ id: RecordID) async throws -> Record? {
        guard let s = try? await local.record(for: Self.syncedID(id)),
            case .bytes(let bytes)? = s.fields["record"]
        else { return nil }
        var r = try RecordCodec.decode(bytes, zoneID: id.zoneID)
        r.id = id
        if case .string(let tag)? = s.fields["tag"] { r.changeTag = tag }
        return r
    }

    private func applyLocally(_ id: RecordID, _ record: Record?) async throws {
        let op: RecordOperation
        if var r = record {
            r.id = id
            r.changeTag = nil
            op = .forceReplace(r)
        } else {
            op = .forceDelete(id)
        }
        try await writeLocally([op], tolerating: [.unknownItem])
    }

    private func token(_ name: String) async throws -> ChangeToken? {
        guard let r = try? await local.record(for: Self.stateID(name)), case .bytes(let b)? = r.fields["token"] else { return nil }
        return ChangeToken(bytes: b)
    }

    private func saveToken(_ name: String, _ token: ChangeToken) async throws {
        let r = Record(recordType: StateRecord.token, id: Self.stateID(name), fields: ["token": .bytes(token.bytes)])
        try await writeLocally([.forceReplace(r)])
    }

    private func deleteState(_ ids: [RecordID]) async throws {
        try await writeLocally(ids.map { .forceDelete($0) }, tolerating: [.unknownItem])
    }

    /// Applies `ops` to the local database, non-atomically, in calls of at most the per-call limit; the first
    /// failure whose code is not `tolerated` is thrown.
    private func writeLocally(_ ops: [RecordOperation], tolerating tolerated: [CloudletError.Code] = []) async throws {
        for chunk in ops.chunked(CloudletLimits.operationsPerRequest) {
            for r in try await local.modify(Array(chunk), atomic: false) {
                if let e = r.error, !tolerated.contains(e.code) { throw e }
            }
        }
    }

    private func ensureLocalZone(_ zone: ZoneID) async throws {
        if zone.isDefault { return }
        do { _ = try await local.zone(for: zone) } catch let e as CloudletError where e.code == .zoneNotFound {
            _ = try await local.createZone(zone)
        }
    }

    private static func stateID(_ name: String) -> RecordID { RecordID(recordName: name, zoneID: stateZone) }
    /// Where the server's change tag and copy of a record are kept (its queue entry is at `StateRecord.key`).
    private static func syncedID(_ id: RecordID) -> RecordID { stateID("synced/" + StateRecord.key(id)) }

    /// A server record as the local store names it: the zone by name under the local user.
    private static func localized(_ r: Record) -> Record {
        var c = r
        c.id = RecordID(recordName: r.recordName, zoneID: ZoneID(zoneName: r.id.zoneID.zoneName))
        return c
    }

    // MARK: - One sync at a time

    private func acquire() async {
        if !busy {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func release() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}
