import CloudletCore
import CloudletStorage

/// Which subscriptions a commit fires (NotificationHub.swift says when this runs: on the hub's own thread).
extension NotificationHub {
    /// A notification for an inbox, before the log numbers it.
    typealias Pending = (inbox: Inbox, notification: RecordNotification)

    /// The notifications `change` produces for the subscriptions of `index`, appended to `out`; fire-once
    /// subscriptions that fired go to `fireOnce` (deleted by the caller). Blocking reads (a deleted record's last
    /// version, a shared record's ancestors) run here: the hub's thread may block.
    func match(
        _ change: CommittedChange, index: SubscriptionIndex, snapshot: CatalogState, fired: inout Set<SubscriptionIndex.Entry>,
        into out: inout [Pending], fireOnce: inout [(SubscriberID, String)]
    ) {
        guard index.count > 0 else { return }
        let partition = partitions[change.partition]
        for (i, event) in change.events.enumerated() {
            let database: DatabaseID
            let recordID: RecordID
            let recordType: String
            var record: Record?
            let reason: NotificationReason
            switch event {
            case .recordSaved(let d, let r):
                (database, recordID, recordType, record) = (d, r.id, r.recordType, r)
                reason = change.isCreation(i) ? .recordCreated : .recordUpdated
            case .recordDeleted(let d, let rid, let type):
                (database, recordID, recordType) = (d, rid, type)
                reason = .recordDeleted
            case .zoneCreated, .zoneDeleted: continue
            }
            let zoneName = recordID.zoneID.zoneName
            var candidates = index.candidates(in: database, zoneName: zoneName, recordType: recordType)
            // Participants whose shared database sees the record, when some subscription is in a shared database.
            var viaShares = false
            if database.scope == .private && index.hasShared(SchemaKey(database)) {
                let key = ZoneKey(database: database, zoneName: zoneName)
                if !snapshot.shares.shares(in: key).isEmpty {
                    if record == nil, reason == .recordDeleted { record = lastVersion(of: change, event: i, recordID, partition) }
                    for viewer in sharedViewers(database, recordID, parent: record?.parent?.recordName, shares: snapshot.shares, partition: partition).sorted() {
                        let shared = DatabaseID(container: database.container, environment: database.environment, scope: .shared, owner: viewer)
                        candidates += index.candidates(in: shared, zoneName: zoneName, recordType: recordType)
                        viaShares = true
                    }
                }
            }
            candidatesChecked.add(candidates.count, ordering: .relaxed)
            guard !candidates.isEmpty else { continue }
            // The deleted version, for query subscriptions' predicates (read only when one may need it).
            if record == nil, reason == .recordDeleted, candidates.contains(where: { if case .query = $0.1.kind { true } else { false } }) {
                record = lastVersion(of: change, event: i, recordID, partition)
            }
            for (who, sub) in candidates {
                // No notification carries a public record its subscriber may not read (its security roles).
                guard Self.mayRead(who, recordType: recordType, record: record, security: snapshot.security) else { continue }
                // In a shared database, a zone is named with its owner.
                if viaShares, who.database.scope == .shared, let zone = Self.zone(of: sub), zone.ownerName != database.owner { continue }
                guard Self.fires(sub, reason: reason, recordID: recordID, recordType: recordType, record: record) else { continue }
                if sub.firesOnce {
                    guard fired.insert(SubscriptionIndex.Entry(who: who, id: sub.id)).inserted else { continue }
                    fireOnce.append((who, sub.id))
                }
                var fields: [String: FieldValue] = [:]
                if let keys = sub.desiredKeys, reason != .recordDeleted, let record {
                    fields = record.fields.filter { keys.contains($0.key) }
                }
                let inbox = Inbox(container: database.container, environment: database.environment, user: who.user)
                out.append((inbox, RecordNotification(
                    id: NotificationID(incarnation: incarnation, sequence: 0), partition: change.partition,
                    lsn: change.lsn, subscriptionID: sub.id, database: who.database, reason: reason, recordID: recordID,
                    recordType: recordType, fields: fields, alertBody: sub.alertBody)))
            }
        }
    }

    /// The commits of every partition after the durable log's cursor (those a crash kept from being matched), read
    /// back from the partitions' logs. Their previous versions are not known: a save counts as an update when the
    /// record's stamps say it was modified after it was created, and a deletion's query subscriptions fire on the
    /// record type alone. Commits a compaction already dropped are skipped (and reported).
    func recoveredChanges() -> [CommittedChange] {
        let cursors = matcherCursors()
        var out: [CommittedChange] = []
        for p in partitions {
            var next = cursors[Int(p.id)] + 1
            let end = p.log.durableLSN
            while next <= end {
                do {
                    let batch = try p.log.frames(from: next, maxBytes: 4 << 20, reader: "notifications")
                    guard batch.lastLSN >= next else { break }
                    for frame in try Log.decodeVerbatim(batch.bytes, partition: p.id) where frame.type == Commit.frameType {
                        var change = CommittedChange(partition: Int(p.id), lsn: frame.lsn, events: [])
                        for m in try Commit.decode(frame.payload).commit.mutations {
                            guard let e = ChangeEvent.from(m) else { continue }
                            if case .recordSaved(_, let r) = e, let c = r.created, let mod = r.modified, mod.timestamp > c.timestamp {
                                change.updates.insert(change.events.count)
                            }
                            change.events.append(e)
                        }
                        out.append(change)
                    }
                    next = batch.lastLSN + 1
                } catch {
                    backgroundErrors?.record(
                        .notification, in: "partition \(p.id)",
                        CloudletError(.internalError, "notifications of commits \(next)…\(end) after a restart: \(error)", cause: error))
                    break
                }
            }
        }
        return out
    }

    /// The version a deletion removed, when it can still be read. When it cannot, query subscriptions fire on the
    /// record type alone (``fires``). A version a compaction dropped meanwhile is expected; any other failure is
    /// reported.
    private func lastVersion(of change: CommittedChange, event i: Int, _ rid: RecordID, _ partition: Partition) -> Record? {
        guard let prev = change.previous[i], case .recordDeleted(let d, _, _) = change.events[i] else { return nil }
        let key = ZoneKey(database: d, zoneName: rid.zoneID.zoneName)
        do { return try partition.readDurable(key, rid.recordName, prev) } catch CloudletError.Code.unknownItem {
        } catch {
            partition.backgroundErrors.record(.notification, in: "partition \(partition.id)", error)
        }
        return nil
    }

    /// Whether `who` may read the record a notification is about: always in its own private database; in the
    /// public database as the security roles say (a deletion whose version cannot be read: when it may read some
    /// records of the type).
    static func mayRead(_ who: SubscriberID, recordType: String, record: Record?, security: SecurityCatalog) -> Bool {
        guard who.database.scope == .public else { return true }
        let key = SchemaKey(container: who.database.container, environment: who.database.environment)
        let scope = security.readScope(key, recordType: recordType, for: .user(who.user))
        guard let record else { return scope != .none }
        return scope.admits(creator: record.created?.userRecordName)
    }

    /// The users whose shared database sees record `recordID` (whose parent is `parent`) of private database
    /// `database`: those granted something by the shares covering it by name, else by those covering the first
    /// ancestor so covered.
    private func sharedViewers(
        _ database: DatabaseID, _ recordID: RecordID, parent: String?, shares: ShareCatalog, partition: Partition
    ) -> Set<String> {
        guard database.scope == .private else { return [] }
        let key = ZoneKey(database: database, zoneName: recordID.zoneID.zoneName)
        let inZone = Array(shares.shares(in: key).values)
        guard !inZone.isEmpty else { return [] }
        var covering = inZone.filter { $0.covers(recordID.recordName) }
        var next = parent
        var depth = 0
        while covering.isEmpty, let current = next, depth < Database.maxParentDepth {
            covering = inZone.filter { $0.covers(current) }
            guard covering.isEmpty else { break }
            depth += 1
            // An ancestor that cannot be read ends the walk: nobody is told.
            guard let found = try? partition.currentEntryBlocking(key, current), let entry = found, !entry.deleted,
                let record = try? partition.readDurable(key, current, entry)
            else { break }
            next = record.parent?.recordName
        }
        return Set(covering.flatMap { s in s.participants.map(\.userRecordName).filter { s.permission(of: $0) != .none } })
    }

    /// The zone a zone subscription, or a query subscription limited to one zone, is about.
    static func zone(of sub: Subscription) -> ZoneID? {
        switch sub.kind {
        case .zone(let z): z
        case .query(_, _, let z): z
        case .database: nil
        }
    }

    static func fires(_ sub: Subscription, reason: NotificationReason, recordID: RecordID, recordType: String, record: Record?)
        -> Bool
    {
        switch sub.kind {
        case .database: return true
        case .zone(let z): return z.zoneName == recordID.zoneID.zoneName
        case .query(let type, let predicate, let zone):
            guard type == recordType else { return false }
            if let zone, zone.zoneName != recordID.zoneID.zoneName { return false }
            switch reason {
            case .recordCreated: guard sub.firesOn.contains(.create) else { return false }
            case .recordUpdated: guard sub.firesOn.contains(.update) else { return false }
            case .recordDeleted: guard sub.firesOn.contains(.delete) else { return false }
            }
            // A deletion whose last version can no longer be read fires on its type alone.
            guard let record else { return reason == .recordDeleted }
            return predicate.matches(record)
        }
    }
}
