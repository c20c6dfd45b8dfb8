import CloudletConcurrency
import CloudletCore
import CloudletStorage
import Foundation
import Synchronization

/// Turns durable commits into notifications for the subscriptions they match, and keeps each user's recent
/// notifications in a log that clients read by position (long-poll, websocket, or directly).
///
/// **Matching.** Once any subscription exists, the hub takes every durable commit from the partitions' publishers
/// into a queue, and a thread of its own (never the cooperative pool, which the writers need) drains it: all the
/// commits queued meanwhile form one batch, matched against a ``SubscriptionIndex`` that follows the catalog's
/// subscription changes (never copied per commit), so a commit costs what the subscriptions that can fire on it
/// cost. Each user's waiting readers are woken once per batch.
///
/// **Logs.** Every batch's notifications are numbered (one sequence for the store) and written to the durable
/// ``NotificationLog`` before any reader sees them, with the LSN through which each partition's commits have been
/// matched; a store reopened after a crash matches the commits after that cursor again, so nothing acknowledged
/// misses its notification. Each user's log (per container and environment) keeps the newest ``capacity``
/// notifications in memory, loaded from the durable log at open. A client that asks from a position no longer held
/// — past the durable log's retention, older than its in-memory log, or from another incarnation of the log — is
/// told so (`gap`) and should resynchronize with change tokens, as CloudKit clients do after missed pushes.
public final class NotificationHub: Sendable {
    /// The longest ``wait(_:after:limit:timeout:)`` waits (one day), whatever it is asked.
    public static let maxWait: Double = 86_400
    /// The most commits queued for the hub's thread; past it commits are dropped and every log reports a gap.
    static let maxQueued = 1_000_000

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

    fileprivate struct InboxLog {
        var items: [RecordNotification] = []
        var head = 0
        /// The newest sequence dropped from this log to keep it within ``capacity`` (0: none).
        var trimmedThrough: UInt64 = 0
        var waiters: [UUID: Waiter] = [:]
    }

    /// A reader waiting for its log to grow, and its timeout (nil: none, or not scheduled yet).
    fileprivate struct Waiter {
        var continuation: CheckedContinuation<Void, Never>
        var timer: DedicatedExecutor.Timer?

        /// Resumes the reader and cancels its timeout (outside the state's lock).
        func wake() {
            if let timer { DedicatedExecutor.push.cancel(timer) }
            continuation.resume()
        }
    }

    /// What readers see.
    private struct State {
        var logs: [Inbox: InboxLog] = [:]
        /// The newest sequence numbered (in any log).
        var lastSequence: UInt64 = 0
        /// The oldest sequence the durable log still keeps: a position before it may have missed something.
        var floor: UInt64 = 1
    }

    /// Commits waiting for the hub's thread.
    private struct Queue {
        var changes: [CommittedChange] = []
        /// Commits were dropped (the queue was full) since the thread last looked.
        var lost = false
        /// The cursor moved without a commit (``start(recover:)``): the durable log should say so.
        var cursorMoved = false
        var stopping = false
    }

    /// What only the hub's thread touches (behind a lock nobody else takes while it runs).
    private struct Matcher {
        var index = SubscriptionIndex()
        /// Fire-once subscriptions already fired (their deletion may still be committing).
        var fired: Set<SubscriptionIndex.Entry> = []
        /// The newest sequence numbered.
        var lastSequence: UInt64 = 0
        /// Per partition, the LSN through which commits have been matched, and what the durable log last says.
        var cursors: [UInt64] = []
        var writtenCursors: [UInt64] = []
        /// Frames written since the last retention check.
        var writesSinceCompaction = 0
    }

    /// A cursor-only frame is written once the partitions' commits matched without a notification add up to this.
    static let cursorInterval: UInt64 = 4096
    /// Retention is checked every this many frames written.
    static let compactionInterval = 256

    public let capacity: Int
    let incarnation: UInt64
    let partitions: [Partition]
    /// Where the subscriptions are.
    private let catalog: Catalog
    private let state = Mutex(State())
    private let queue = Monitor(Queue())
    private let matcher = Mutex(Matcher())
    private let thread = Mutex<NativeThread?>(nil)
    private let listenerID: Int
    /// The durable log (nil: a read-only store, whose hub never writes).
    private let durable: NotificationLog?
    let backgroundErrors: BackgroundErrors?
    /// Subscriptions looked at, over every event matched (tests: the index keeps this to those that can fire).
    let candidatesChecked = Atomic<Int>(0)
    /// Commits matched again at open, after the durable log's cursor (a crash came between them and their
    /// notifications).
    let commitsRecovered = Atomic<Int>(0)
    /// Frames of the durable log read at open (headers only), and those whose notifications were decoded to fill
    /// the in-memory logs (tests: opening follows what is kept, not the log).
    let framesScannedAtOpen: Int
    let framesDecodedAtOpen: Int
    /// Batches the hub's thread has matched.
    let batchesMatched = Atomic<Int>(0)
    /// Readers waiting now in ``wait(_:after:limit:timeout:)`` (long polls, websocket pushers).
    let waitingReaders = Atomic<Int>(0)

    init(
        partitions: [Partition], catalog: Catalog, listenerID: Int, capacity: Int = 10_000,
        durable: (log: NotificationLog, recovered: NotificationLog.Recovered)? = nil, backgroundErrors: BackgroundErrors? = nil
    ) {
        self.partitions = partitions
        self.catalog = catalog
        self.listenerID = listenerID
        self.capacity = capacity
        self.durable = durable?.log
        self.backgroundErrors = backgroundErrors
        let recovered = durable?.recovered
        incarnation = recovered?.incarnation ?? UInt64.random(in: 1...(UInt64(1) << 48))
        var st = State()
        st.lastSequence = recovered?.lastSequence ?? 0
        st.floor = durable?.log.oldestSequence(next: st.lastSequence + 1) ?? 1
        // The newest `capacity` of each user's (the log loads no more), and the newest it left out.
        for (inbox, items) in recovered?.inboxes ?? [:] {
            st.logs[inbox] = InboxLog(items: Array(items.filter { $0.id.sequence >= st.floor }.suffix(capacity)))
        }
        for (inbox, sequence) in recovered?.trimmed ?? [:] { st.logs[inbox, default: InboxLog()].trimmedThrough = sequence }
        framesScannedAtOpen = recovered?.framesScanned ?? 0
        framesDecodedAtOpen = recovered?.framesDecoded ?? 0
        state.withLock { $0 = st }
        matcher.withLock { m in
            m.lastSequence = st.lastSequence
            m.cursors = recovered?.cursors ?? Array(repeating: 0, count: partitions.count)
            m.writtenCursors = m.cursors
        }
    }

    /// Starts listening to commits (idempotent). Called when a subscription is saved, and at open when some exist —
    /// then with `recover` (the opening thread, which may block): the commits after the durable log's cursor, which
    /// a crash kept from being matched, are matched first. Otherwise the cursor moves to where the partitions are:
    /// nothing before was subscribed to.
    func start(recover: Bool = false) {
        thread.withLock { t in
            guard t == nil else { return }
            let snapshot = catalog.snapshot()
            matcher.withLock { m in
                m.index = SubscriptionIndex(snapshot)
                _ = catalog.subscriptionChanges(after: snapshot.version, through: snapshot.version)
                if !recover { m.cursors = partitions.map { max(m.cursors[Int($0.id)], $0.log.durableLSN) } }
            }
            if recover, durable != nil {
                let missed = recoveredChanges()
                commitsRecovered.store(missed.count, ordering: .relaxed)
                if !missed.isEmpty { handleInSteps(missed, force: true) }
            }
            do {
                t = try NativeThread(name: "cloudlet-notify") { [self] in run() }
            } catch {
                StoreLog.warning("notifications are off: \(error)")
                return
            }
            if !recover {
                queue.withLock { $0.cursorMoved = true }
                queue.signal(.work)
            }
            let queue = self.queue
            for p in partitions {
                p.publisher.add(listenerID, .sink { change in
                    let taken = queue.withLock { q -> Bool in
                        guard q.changes.count < Self.maxQueued else {
                            q.lost = true
                            return false
                        }
                        q.changes.append(change)
                        return true
                    }
                    queue.signal(.work)
                    // A full queue drops this commit (and reports a gap), but keeps listening.
                    _ = taken
                    return true
                })
            }
        }
    }

    /// The durable log's cursor, per partition.
    func matcherCursors() -> [UInt64] { matcher.withLock { $0.cursors } }

    /// Stops listening, lets the thread finish what is queued, and wakes every waiting reader.
    func stop() {
        for p in partitions { p.publisher.remove(listenerID) }
        queue.withLock { $0.stopping = true }
        queue.signal(.work)
        thread.withLock { $0 }?.join()
        let waiters = state.withLock { s -> [Waiter] in
            var all: [Waiter] = []
            for k in s.logs.keys {
                all += s.logs[k]!.waiters.values
                s.logs[k]!.waiters = [:]
            }
            return all
        }
        for w in waiters { w.wake() }
    }

    /// The hub's thread: drains the queue batch by batch until stopped.
    private func run() {
        while true {
            let (changes, lost, moved, stopping) = queue.withLock(
                waitingOn: .work, until: { !$0.changes.isEmpty || $0.stopping || $0.cursorMoved }
            ) { q in
                defer { (q.changes, q.lost, q.cursorMoved) = ([], false, false) }
                return (q.changes, q.lost, q.cursorMoved, q.stopping)
            }
            if lost {
                // Commits were dropped: no log can be trusted to be complete from here on.
                state.withLock { s in
                    for k in s.logs.keys {
                        s.logs[k]!.head = s.logs[k]!.items.count
                        s.logs[k]!.trimmedThrough = max(s.logs[k]!.trimmedThrough, s.logs[k]!.items.last?.id.sequence ?? 0)
                    }
                }
            }
            if !changes.isEmpty || moved { handleInSteps(changes, force: moved) }
            if stopping {
                // The cursor of what was matched without a notification, so that the next open starts from here.
                handle([], force: true)
                return
            }
        }
    }

    /// The most commits matched as one batch: a backlog (a slow hub, or the commits after the cursor at open) is
    /// matched in steps, so that no batch's notifications grow with it.
    static let maxBatchCommits = 1024

    /// ``handle(_:force:)`` for at most ``maxBatchCommits`` at a time (`force` on the last step).
    private func handleInSteps(_ changes: [CommittedChange], force: Bool) {
        var start = 0
        repeat {
            let end = min(start + Self.maxBatchCommits, changes.count)
            handle(Array(changes[start..<end]), force: force && end == changes.count)
            start = end
        } while start < changes.count
    }

    /// Matches a batch of commits, numbers what they fire, makes it durable, then appends it to the logs and wakes
    /// their readers. `force`: write the cursor to the durable log even if little moved.
    private func handle(_ changes: [CommittedChange], force: Bool = false) {
        let snapshot = catalog.snapshot()
        var out: [Pending] = []
        var fireOnce: [(SubscriberID, String)] = []
        var floor: UInt64?
        matcher.withLock { m in
            if snapshot.version > m.index.version {
                for change in catalog.subscriptionChanges(after: m.index.version, through: snapshot.version) { m.index.apply(change) }
                m.index.version = snapshot.version
            }
            for change in changes {
                match(change, index: m.index, snapshot: snapshot, fired: &m.fired, into: &out, fireOnce: &fireOnce)
                m.cursors[change.partition] = max(m.cursors[change.partition], change.lsn)
            }
            for i in out.indices {
                m.lastSequence += 1
                out[i].notification.id = NotificationID(incarnation: incarnation, sequence: m.lastSequence)
            }
            guard let durable else { return }
            let moved = zip(m.cursors, m.writtenCursors).reduce(UInt64(0)) { $0 + ($1.0 - $1.1) }
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            do {
                if !out.isEmpty || (moved > 0 && (force || moved >= Self.cursorInterval)) {
                    if !out.isEmpty { CrashPoint.reached("notifications.matched") }  // commits durable, their notifications not
                    try durable.write(NotificationLog.Batch(incarnation: incarnation, time: now, cursors: m.cursors, notifications: out))
                    m.writtenCursors = m.cursors
                    m.writesSinceCompaction += 1
                }
                if m.writesSinceCompaction >= Self.compactionInterval || force {
                    m.writesSinceCompaction = 0
                    floor = try durable.compact(now: now, next: m.lastSequence + 1)
                }
            } catch {
                // Delivered from memory all the same; a restart may then report a gap, or match these commits again.
                backgroundErrors?.record(.notification, in: "notification log", error)
            }
        }
        batchesMatched.add(1, ordering: .relaxed)
        if let floor {
            state.withLock { s in
                s.floor = max(s.floor, floor)
                for k in s.logs.keys { s.logs[k]!.dropBefore(floor) }
            }
        }
        if !out.isEmpty { append(out) }
        for (who, id) in fireOnce {
            do {
                let (_, version) = try catalog.commit { st in
                    (st.subscriptions(of: who)[id] != nil ? [.deleteSubscription(who, id: id)] : [], ())
                }
                try catalog.waitDurableBlocking(version)
            } catch {
                // It stays fired for as long as this process runs (`fired`); after a reopen it may fire once more.
                StoreLog.warning("deleting fire-once subscription '\(id)' of \(who.user) after it fired: \(error)")
            }
        }
    }

    /// Numbers `items` in their logs and wakes each log's readers once.
    private func append(_ items: [Pending]) {
        let wake = state.withLock { s -> [Waiter] in
            var wake: [Waiter] = []
            var touched: Set<Inbox> = []
            for (inbox, n) in items {
                touched.insert(inbox)
                s.logs[inbox, default: InboxLog()].keep(n, capacity: capacity)
                s.lastSequence = max(s.lastSequence, n.id.sequence)
            }
            for inbox in touched {
                wake += s.logs[inbox]!.waiters.values
                s.logs[inbox]!.waiters = [:]
            }
            return wake
        }
        for w in wake { w.wake() }
    }

    /// The notifications of `inbox` after `position` (nil: from the start — every one the log holds), at most
    /// `limit`. `gap` when something after `position` is no longer held; a read from the start is a read from
    /// before the first notification, so it is a gap too once older notifications were dropped (from this user's
    /// in-memory log, or by the durable log's retention).
    public func read(_ inbox: Inbox, after position: NotificationID?, limit: Int = 200) -> Batch {
        state.withLock { s in
            let log = s.logs[inbox] ?? InboxLog()
            let live = log.items[log.head...]
            let end = NotificationID(incarnation: incarnation, sequence: s.lastSequence)
            var gap = false
            var from = live.startIndex
            if let position {
                if position.incarnation != incarnation {
                    gap = true
                } else {
                    // Something after `position` may have been dropped: by the durable log's retention (`floor` is
                    // at least 1, so `floor - 1` cannot wrap), or from this user's in-memory log.
                    if position.sequence < s.floor - 1 || position.sequence < log.trimmedThrough { gap = true }
                    from = log.firstIndex(after: position.sequence)
                }
            } else if s.floor > 1 || log.trimmedThrough > 0 {
                gap = true  // as a position before sequence 1 would be
            }
            let page = Array(live[from...].prefix(limit))
            return Batch(notifications: page, next: page.last?.id ?? (position.flatMap { $0.incarnation == incarnation ? max($0, end) : nil } ?? end), gap: gap)
        }
    }

    /// Like ``read(_:after:limit:)``, but waits up to `timeout` seconds for something to arrive when there is
    /// nothing yet (the long-poll of CloudKit's web courier, and the websocket feed). A timeout that is not a
    /// positive number (NaN included) does not wait; one over ``maxWait`` waits that long; `.infinity` waits until
    /// something arrives, with no timer at all (a websocket pusher, which ends by cancellation).
    ///
    /// Cancelling the calling task ends the wait at once (the front end does so when the client goes away) with
    /// what the log holds then. The timeout runs on ``DedicatedExecutor/push``, never on the cooperative pool.
    public func wait(_ inbox: Inbox, after position: NotificationID?, limit: Int = 200, timeout: Double) async -> Batch {
        let first = read(inbox, after: position, limit: limit)
        // `!(timeout > 0)` is true for NaN too, which would trap in the conversion below.
        if !first.notifications.isEmpty || first.gap || !(timeout > 0) || Task.isCancelled { return first }
        let wait = timeout == .infinity ? nil : Duration.milliseconds(Int64((min(timeout, Self.maxWait) * 1000).rounded(.up)))
        let id = UUID()
        waitingReaders.add(1, ordering: .relaxed)
        defer { waitingReaders.subtract(1, ordering: .relaxed) }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let registered = self.state.withLock { s -> Bool in
                    s.logs[inbox, default: InboxLog()].register(id, Waiter(continuation: c), after: position)
                }
                guard registered else { return c.resume() }
                guard let wait else { return }
                let timer = DedicatedExecutor.push.schedule(after: wait) {
                    self.state.withLock { s in s.logs[inbox]?.waiters.removeValue(forKey: id) }?.continuation.resume()
                }
                let stillWaiting = self.state.withLock { s -> Bool in
                    guard s.logs[inbox]?.waiters[id] != nil else { return false }
                    s.logs[inbox]!.waiters[id]!.timer = timer
                    return true
                }
                if !stillWaiting { DedicatedExecutor.push.cancel(timer) }
            }
        } onCancel: {
            self.state.withLock { s in s.logs[inbox]?.waiters.removeValue(forKey: id) }?.wake()
        }
        return read(inbox, after: position, limit: limit)
    }
}

extension NotificationHub.InboxLog {
    /// Adds a reader waiting for a notification after `position`, in place: false (nothing added) when one has
    /// arrived since its first read, or when its task was cancelled (a cancellation before this point found no
    /// waiter to end; the flag is set before the handler runs). Taking the log out of the table, adding and putting
    /// it back copied every waiter already there for each new one: the 10,000 websockets of one user cost the push
    /// threads ~2.5 s of CPU to open, most of it after their handshakes were answered.
    fileprivate mutating func register(
        _ id: UUID, _ waiter: NotificationHub.Waiter, after position: NotificationID?
    ) -> Bool {
        if head < items.count, let last = items.last, position == nil || last.id.sequence > position!.sequence {
            return false
        }
        if Task.isCancelled { return false }
        waiters[id] = waiter
        return true
    }

    /// The index of the first live notification with a sequence after `sequence` (`items.count`: none): a binary
    /// search, since sequences increase along the log (a reader of a 10,000-long log scanned it all on every read).
    fileprivate func firstIndex(after sequence: UInt64) -> Int {
        var low = head, high = items.count
        while low < high {
            let mid = (low + high) / 2
            if items[mid].id.sequence > sequence { high = mid } else { low = mid + 1 }
        }
        return low
    }

    /// Keeps `n` (numbered, newer than every one kept), dropping the oldest beyond `capacity`.
    fileprivate mutating func keep(_ n: RecordNotification, capacity: Int) {
        items.append(n)
        if items.count - head > capacity {
            trimmedThrough = items[head].id.sequence
            head += 1
        }
        if head > 4096 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
    }

    /// Drops the notifications before sequence `floor` (the durable log no longer keeps them).
    fileprivate mutating func dropBefore(_ floor: UInt64) {
        while head < items.count && items[head].id.sequence < floor { head += 1 }
        if head > 0 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
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
