import CloudletConcurrency
import CloudletCore
import Foundation
import Synchronization

/// Turns durable commits into notifications for the subscriptions they match, and keeps each user's recent
/// notifications in a log that clients read by position (long-poll, websocket, or directly).
///
/// The hub listens to the store's commit stream once any subscription exists. Each user's log (per container
/// and environment) keeps the newest ``capacity`` notifications in memory; a client that asks from a position
/// the log no longer holds — older than its oldest entry, or from before the store was reopened — is told so
/// (`gap`) and should resynchronize with change tokens, as CloudKit clients do after missed pushes.
public final class NotificationHub: Sendable {
    /// The longest ``wait(_:after:limit:timeout:)`` waits (one day), whatever it is asked.
    public static let maxWait: Double = 86_400
    /// Whose log: a user in a container and environment.
    public struct Inbox: Hashable, Sendable {
        public var container: String
        public var environment: CloudletCore.Environment
        public var user: String

        public init(container: String, environment: CloudletCore.Environment, user: String) {
            self.container = container
            self.environment = environment
            self.user = user
        }
    }

    /// A read of a log.
    public typealias Batch = NotificationBatch

    private struct Log {
        var items: [RecordNotification] = []
        var head = 0
        var nextSequence: UInt64 = 1
        var waiters: [UUID: CheckedContinuation<Void, Never>] = [:]
    }

    private struct State {
        var started = false
        var logs: [Inbox: Log] = [:]
        /// Fire-once subscriptions already fired (their deletion may still be committing).
        var fired: Set<String> = []
    }

    public let capacity: Int
    let incarnation: UInt64
    private let partitions: [Partition]
    /// Where the subscriptions are.
    private let catalog: Catalog
    private let state = Mutex(State())
    private let listenerID: Int

    init(partitions: [Partition], catalog: Catalog, listenerID: Int, capacity: Int = 10_000) {
        self.partitions = partitions
        self.catalog = catalog
        self.listenerID = listenerID
        self.capacity = capacity
        incarnation = UInt64.random(in: 1...(UInt64(1) << 48))
    }

    /// Starts listening to commits (idempotent). Called when a subscription is saved, and at open when some exist.
    func start() {
        let first = state.withLock { s -> Bool in
            defer { s.started = true }
            return !s.started
        }
        guard first else { return }
        let (stream, continuation) = AsyncThrowingStream<CommittedChange, any Error>.makeStream(
            bufferingPolicy: .bufferingOldest(1_000_000))
        for p in partitions { p.publisher.add(listenerID, continuation) }
        Task.detached { [self] in
            do {
                for try await change in stream { await handle(change) }
            } catch {
                // The commit stream overflowed: the hub's logs cannot be trusted to be complete from here on.
                state.withLock { s in for k in s.logs.keys { s.logs[k]!.head = s.logs[k]!.items.count } }
            }
        }
    }

    func stop() {
        for p in partitions { p.publisher.remove(listenerID) }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            var all: [CheckedContinuation<Void, Never>] = []
            for k in s.logs.keys {
                all += s.logs[k]!.waiters.values
                s.logs[k]!.waiters = [:]
            }
            return all
        }
        for w in waiters { w.resume() }
    }

    private func handle(_ change: CommittedChange) async {
        let snapshot = catalog.snapshot()
        let subscriptions = snapshot.subscriptions
        guard !subscriptions.isEmpty else { return }
        var out: [(Inbox, RecordNotification)] = []
        let anyShared = subscriptions.keys.contains { $0.database.scope == .shared }
        var fireOnce: [(SubscriberID, String)] = []
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
                // The deleted version, for query subscriptions' predicates.
                if let prev = change.previous[i] {
                    let key = ZoneKey(database: d, zoneName: rid.zoneID.zoneName)
                    let partition = partitions[change.partition]
                    // When it cannot be read, query subscriptions fire on the record type alone (``fires``). A
                    // version a compaction dropped meanwhile is expected; any other failure is reported.
                    // A read that may go to the disk: off the cooperative pool, which this task runs on.
                    let name = rid.recordName
                    do { record = try await ThreadBridge.offload { try partition.readDurable(key, name, prev) } } catch CloudletError.Code.unknownItem {
                    } catch {
                        partition.backgroundErrors.record(.notification, in: "partition \(partition.id)", error)
                    }
                }
            case .zoneCreated, .zoneDeleted: continue
            }
            // Participants whose shared database sees the record, when some subscription is in a shared database.
            let viewers = anyShared
                ? await sharedViewers(database, recordID, parent: record?.parent?.recordName, shares: snapshot.shares, partition: partitions[change.partition])
                : []
            for (who, subs) in subscriptions
            where who.database == database || (who.database.scope == .shared && who.database.container == database.container
                && who.database.environment == database.environment && viewers.contains(who.database.owner))
            {
                // No notification carries a public record its subscriber may not read (its security roles).
                guard Self.mayRead(who, recordType: recordType, record: record, security: snapshot.security) else { continue }
                for sub in subs.values.sorted(by: { $0.id < $1.id }) {
                    // In a shared database, a zone is named with its owner.
                    if who.database.scope == .shared, let zone = Self.zone(of: sub), zone.ownerName != database.owner { continue }
                    guard Self.fires(sub, reason: reason, recordID: recordID, recordType: recordType, record: record) else {
                        continue
                    }
                    if sub.firesOnce {
                        let key = "\(who.database)|\(who.user)|\(sub.id)"
                        let already = state.withLock { !$0.fired.insert(key).inserted }
                        if already { continue }
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
        if !out.isEmpty { append(out) }
        for (who, id) in fireOnce {
            do {
                let (_, version) = try await catalog.commit(waitingForRoom: { st in
                    (st.subscriptions(of: who)[id] != nil ? [.deleteSubscription(who, id: id)] : [], ())
                })
                try await catalog.waitDurable(version)
            } catch {
                // It stays fired for as long as this process runs (`fired`); after a reopen it may fire once more.
                StoreLog.warning("deleting fire-once subscription '\(id)' of \(who.user) after it fired: \(error)")
            }
        }
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
    ) async -> Set<String> {
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
            guard let found = try? await partition.currentEntry(key, current), let entry = found, !entry.deleted,
                let record = try? await partition.read(key, current, entry)
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

    private func append(_ items: [(Inbox, RecordNotification)]) {
        let wake = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            var wake: [CheckedContinuation<Void, Never>] = []
            for (inbox, n) in items {
                var log = s.logs[inbox] ?? Log()
                var n = n
                n.id = NotificationID(incarnation: incarnation, sequence: log.nextSequence)
                log.nextSequence += 1
                log.items.append(n)
                if log.items.count - log.head > capacity { log.head += 1 }
                if log.head > 4096 && log.head * 2 > log.items.count {
                    log.items.removeFirst(log.head)
                    log.head = 0
                }
                wake += log.waiters.values
                log.waiters = [:]
                s.logs[inbox] = log
            }
            return wake
        }
        for w in wake { w.resume() }
    }

    /// The notifications of `inbox` after `position` (nil: every one the log holds), at most `limit`.
    public func read(_ inbox: Inbox, after position: NotificationID?, limit: Int = 200) -> Batch {
        state.withLock { s in
            let log = s.logs[inbox] ?? Log()
            let live = log.items[log.head...]
            let end = NotificationID(incarnation: incarnation, sequence: log.nextSequence - 1)
            var gap = false
            var from = live.startIndex
            if let position {
                if position.incarnation != incarnation {
                    gap = true
                } else {
                    let oldest = live.first?.id.sequence ?? log.nextSequence
                    // `oldest` is at least 1; `position.sequence + 1` would trap on a client's UInt64.max.
                    if position.sequence < oldest - 1 { gap = true }
                    from = live.firstIndex { $0.id.sequence > position.sequence } ?? live.endIndex
                }
            }
            let page = Array(live[from...].prefix(limit))
            return Batch(notifications: page, next: page.last?.id ?? (position.flatMap { $0.incarnation == incarnation ? max($0, end) : nil } ?? end), gap: gap)
        }
    }

    /// Like ``read(_:after:limit:)``, but waits up to `timeout` seconds for something to arrive when there is
    /// nothing yet (the long-poll of CloudKit's web courier, and the websocket feed). A timeout that is not a
    /// positive number (NaN included) does not wait; one over ``maxWait`` waits that long.
    public func wait(_ inbox: Inbox, after position: NotificationID?, limit: Int = 200, timeout: Double) async -> Batch {
        let first = read(inbox, after: position, limit: limit)
        // `!(timeout > 0)` is true for NaN too, which would trap in the conversion below.
        if !first.notifications.isEmpty || first.gap || !(timeout > 0) { return first }
        let wait = Duration.milliseconds(Int64((min(timeout, Self.maxWait) * 1000).rounded(.up)))
        let id = UUID()
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let registered = state.withLock { s -> Bool in
                var log = s.logs[inbox] ?? Log()
                // Something may have arrived between the first read and now.
                if let last = log.items.last, position == nil || last.id.sequence > position!.sequence { return false }
                log.waiters[id] = c
                s.logs[inbox] = log
                return true
            }
            guard registered else { return c.resume() }
            Task {
                try? await Task.sleep(for: wait)
                self.state.withLock { s in s.logs[inbox]?.waiters.removeValue(forKey: id) }?.resume()
            }
        }
        return read(inbox, after: position, limit: limit)
    }
}

extension CloudletStore {
    /// Notifications of a user's subscriptions in `container` and `environment` after `position` (see
    /// ``NotificationHub``).
    public func notifications(
        container: String, environment: CloudletCore.Environment = .development, user: String,
        after position: NotificationID?, limit: Int = 200, wait timeout: Double = 0
    ) async -> NotificationHub.Batch {
        await notificationHub.wait(
            NotificationHub.Inbox(container: container, environment: environment, user: user), after: position,
            limit: limit, timeout: timeout)
    }
}
