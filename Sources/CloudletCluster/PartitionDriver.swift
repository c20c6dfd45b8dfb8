import Cloudlet
import CloudletConcurrency
import CloudletCore
import CloudletReplication
import CloudletStorage
import Dispatch
import Foundation
import Synchronization

/// A log the cluster replicates: a data partition's, or the catalog's (its own log, with a leader of its own that
/// follows partition 0's: ``PartitionDriver/init(target:node:replicas:shouldLead:)``).
enum ReplicatedLog: Sendable {
    case partition(Partition)
    case catalog(Catalog, Log)

    var log: Log {
        switch self {
        case .partition(let p): p.log
        case .catalog(_, let log): log
        }
    }

    /// The number messages and etcd keys name it by (``Catalog/logPartition`` for the catalog).
    var id: UInt32 {
        switch self {
        case .partition(let p): p.id
        case .catalog: Catalog.logPartition
        }
    }

    /// Appends a leader's frames verbatim and applies them (a partition's decoded ahead, with the assets they
    /// reference: ``Partition/decodeFollowed(_:partition:)``); returns the last LSN.
    func appendFollowed(_ bytes: [UInt8], decoded: Partition.FollowedFrames?, leaderEpoch: UInt64) throws -> UInt64 {
        switch self {
        case .partition(let p):
            if let decoded { try p.appendFollowed(decoded, leaderEpoch: leaderEpoch) } else {
                try p.appendFollowed(bytes, leaderEpoch: leaderEpoch)
            }
        case .catalog(let c, _): try c.appendFollowed(bytes, leaderEpoch: leaderEpoch)
        }
    }

    /// Waits until `lsn` is durable here and visible to readers.
    func waitApplied(_ lsn: UInt64) throws {
        switch self {
        case .partition(let p): try p.waitFollowedDurable(lsn)
        case .catalog(let c, _): try c.waitDurableBlocking(lsn)
        }
    }
}

/// The I/O shell around one partition's ``Replica``: feeds it the clock, etcd's leader key and published progress,
/// messages from other nodes and the log's progress, and performs the actions it returns — etcd calls, messages,
/// verbatim appends through the engine's one apply path, fencing — and, as the log's ``LogCommitGate``, admits or
/// refuses the engine's own commits and holds their acknowledgement until the ack mode is satisfied.
///
/// Locking: the replica and the waiters live in `state`; actions are performed after it is released, and nothing
/// calls into the log while holding it (``admit(lsn:fence:)`` runs under the log's lock and takes `state`).
final class PartitionDriver: LogCommitGate, @unchecked Sendable {
    // `@unchecked Sendable`: mutable state is in `state` (a Mutex); `appender` serializes the follower's appends.
    let id: UInt32
    let target: ReplicatedLog
    private let node: ClusterNode
    /// Whether this node should lead this log now (the catalog: only where partition 0 is led).
    private let shouldLead: @Sendable (PartitionDriver) -> Bool
    private let state: Mutex<State>
    /// Appends and truncations, in the order the replica asked for them, on one thread at a time.
    private let appender: DispatchQueue
    /// Waits for the followed frames to become durable and reports them, off `appender`: the next batch is appended
    /// (and applied) while the log's committer fsyncs the previous one, so one fsync can cover several batches.
    private let syncWaiter: DispatchQueue
    private let leaderKeyPath: String

    struct State {
        var replica: Replica
        /// The highest LSN acknowledged by the leader (all earlier frames are committed).
        var committed: UInt64 = 0
        /// This node's own frames staged as leader and not resolved yet → writers waiting for them.
        var admitted: [UInt64: [CheckedContinuation<Void, any Error>]] = [:]
        /// Own frames whose outcome became unknown, with why.
        var abandoned: [UInt64: String] = [:]
        var reportedDurable: UInt64 = 0
        /// The progress line of a catch-up (``CatchUpProgress``).
        var catchUp = CatchUpProgress()
        var progress: [NodeID: LogEnd] = [:]
        /// Set once a truncation was asked for: nothing more is appended until the node restarts.
        var stopped = false
        var failovers = 0
        var lastRole: Replica.Role = .follower
        /// The compaction horizon last handed to the log, the one last stored, and when.
        var raisedHorizon: UInt64 = 0
        var persistedHorizon: UInt64 = 0
        var horizonPersistedAt: Millis = 0
    }

    init(target: ReplicatedLog, node: ClusterNode, replicas: [NodeID], shouldLead: @escaping @Sendable (PartitionDriver) -> Bool = { _ in true }) {
        id = target.id
        self.target = target
        self.node = node
        self.shouldLead = shouldLead
        var config = ReplicaConfiguration(node: node.configuration.node, replicas: replicas)
        config.ackMode = node.configuration.ackMode
        config.leaseTTL = node.configuration.leaseTTL
        config.renewInterval = node.configuration.leaseTTL / 5
        config.clockSkewMargin = node.configuration.clockSkewMargin
        config.seed = UInt64(truncatingIfNeeded: node.configuration.node.name.hashValue) ^ UInt64(id)
        state = Mutex(State(replica: Replica(configuration: config)))
        appender = DispatchQueue(label: "cloudlet-follow-\(target.id)")
        syncWaiter = DispatchQueue(label: "cloudlet-follow-sync-\(target.id)")
        leaderKeyPath = node.keys.leader(target.id)
    }

    var log: Log { target.log }

    /// Starts the replica from the log's durable content and installs the gate.
    func start() throws {
        try log.flush()
        let history = try Self.epochHistory(of: log)
        let last = log.lastLSN
        log.setCommitGate(self)
        feed(.start(now: node.now(), lastLSN: last, history: history))
        state.withLock { $0.reportedDurable = last }
    }

    /// The log's epoch history: the compaction marker's for the compacted prefix (compaction recorded the epoch of
    /// every frame it covered, dropped ones included), then the epoch of every later frame (their headers). Throws
    /// `.invalidArguments` for a log whose marker does not record its epochs (compacted before markers did, or
    /// repaired with frames lost): such a node must be re-seeded.
    static func epochHistory(of log: Log) throws -> EpochHistory {
        var history = EpochHistory()
        var next: UInt64 = 1
        if let marker = log.compactionMarker {
            guard let epochs = marker.epochs else {
                throw CloudletError(
                    .invalidArguments,
                    "the log of partition \(log.partition) in \(log.directory) was compacted (generation \(marker.generation), "
                        + "LSNs 1…\(marker.coveredThrough)) by a version that did not record the epochs of what it compacted, or "
                        + "repaired with frames lost: replication needs them; re-seed this node from a live replica "
                        + "(docs/replication.md, \"Compaction\")")
            }
            for e in epochs { history.record(epoch: e.epoch, at: e.firstLSN) }
            next = marker.coveredThrough + 1
        }
        while next <= log.durableLSN {
            let batch = try log.frames(from: next, maxBytes: 8 << 20, reader: "epoch history")
            guard batch.lastLSN >= batch.firstLSN else { break }
            for frame in try Log.splitVerbatim(batch.bytes, partition: log.partition) {
                history.record(epoch: frame.epoch, at: frame.lsn)
            }
            next = batch.lastLSN + 1
        }
        return history
    }

    // MARK: Status

    struct Status: Sendable {
        var role: Replica.Role
        var leader: LeaderKey?
        var durable: LogEnd
        var committed: UInt64
        var progress: [NodeID: LogEnd]
        var failovers: Int
        /// The replica's compaction horizon (docs/replication.md, "Compaction").
        var compactionHorizon: UInt64
    }

    var status: Status {
        state.withLock { s in
            Status(
                role: s.replica.role, leader: s.replica.leaderKey, durable: s.replica.durableEnd, committed: s.committed,
                progress: s.progress, failovers: s.failovers, compactionHorizon: s.replica.compactionHorizon)
        }
    }

    /// The leader key as last polled (nil: no leader).
    var leader: LeaderKey? { state.withLock { $0.replica.leaderKey } }

    var isLeader: Bool {
        state.withLock { s in
            if case .leader = s.replica.role { return true }
            return false
        }
    }

    // MARK: Events

    /// Hands `event` to the replica and performs what it asks.
    func feed(_ event: ReplicaEvent) {
        let actions = state.withLock { s -> [ReplicaAction] in
            let actions = s.replica.on(event)
            if s.replica.role != s.lastRole {
                if case .leader = s.replica.role { s.failovers += 1 }
                s.lastRole = s.replica.role
            }
            return actions
        }
        perform(actions)
    }

    /// One round of the driver's loop: the clock, then the log's durable end if it moved.
    func tick() {
        let now = node.now()
        feed(.tick(now: now))
        reportDurable()
        raiseCompactionLimit(now: now)
        // A leader that should not lead (the catalog's, once partition 0 is led elsewhere) gives its lease up, so
        // that the right node can take over.
        if isLeader, !shouldLead(self), let lease = currentLease {
            feed(.leaseLost(lease: lease))
            let etcd = node.etcd
            Task { try? await etcd.revokeLease(Int64(bitPattern: lease)) }
        }
    }

    /// Lets the log compact up to the replica's compaction horizon, and stores it (the log's `HORIZON` file, for a
    /// restart and `cloudlet-tool compact`) once it has grown, at most every ``horizonPersistInterval``.
    private func raiseCompactionLimit(now: Millis) {
        let (horizon, raise, persist) = state.withLock { s -> (UInt64, Bool, Bool) in
            // A stopping node's log is closing, or about to be truncated and reopened by another driver.
            guard !s.stopped else { return (0, false, false) }
            let raise = s.replica.compactionHorizon > s.raisedHorizon
            if raise { s.raisedHorizon = s.replica.compactionHorizon }
            let persist = s.raisedHorizon > s.persistedHorizon && now >= s.horizonPersistedAt + Self.horizonPersistInterval
            if persist {
                s.persistedHorizon = s.raisedHorizon
                s.horizonPersistedAt = now
            }
            return (s.raisedHorizon, raise, persist)
        }
        guard raise || persist else { return }
        do { try log.raiseCompactionLimit(to: horizon, persist: persist) } catch {
            ServerLog.warning("partition \(id): storing the compaction horizon failed: \(error)")
        }
    }

    /// How often a moving compaction horizon is stored. 5 s.
    static let horizonPersistInterval: Millis = 5_000

    private func reportDurable() {
        let durable = log.durableLSN
        let now = node.now()
        let id = id
        let (moved, line) = state.withLock { s -> (Bool, String?) in
            guard durable > s.reportedDurable else { return (false, nil) }
            s.reportedDurable = durable
            // A follower far behind the leader's published end says how its catch-up goes.
            guard case .follower = s.replica.role, let leader = s.replica.leaderKey, let end = s.progress[leader.node] else {
                return (true, nil)
            }
            let name = id == Catalog.logPartition ? "catalog" : "partition \(id)"
            return (true, s.catchUp.note(log: name, durable: durable, leaderEnd: end.lsn, leader: leader.node.name, now: now))
        }
        if let line { ServerLog.note(line) }
        if moved { feed(.durable(lsn: durable, now: now)) }
    }

    /// The partition's keys as etcd holds them now.
    func coordinator(_ keys: [EtcdClient.KeyValue]) {
        let prefix = node.keys.partition(id) + "progress/"
        var leader: LeaderKey?
        var progress: [NodeID: LogEnd] = [:]
        for kv in keys {
            if kv.key == leaderKeyPath {
                leader = LeaderKey(
                    node: NodeID(String(decoding: kv.value, as: UTF8.self)), epoch: UInt64(kv.createRevision),
                    lease: UInt64(bitPattern: kv.lease))
            } else if kv.key.hasPrefix(prefix) {
                let parts = String(decoding: kv.value, as: UTF8.self).split(separator: ":")
                if parts.count == 2, let e = UInt64(parts[0]), let l = UInt64(parts[1]) {
                    progress[NodeID(String(kv.key.dropFirst(prefix.count)))] = LogEnd(epoch: e, lsn: l)
                }
            }
        }
        state.withLock { $0.progress = progress }
        feed(.leaderKey(leader))
        feed(.progress(progress))
    }

    // MARK: Actions

    private func perform(_ actions: [ReplicaAction]) {
        for action in actions { perform(action) }
    }

    private func perform(_ action: ReplicaAction) {
        let etcd = node.etcd
        switch action {
        case .send(let to, let message):
            node.send(to: to, ReplicaEnvelope(log: id, from: node.configuration.node, message: message))
        case .serveFrames(let to, let epoch, let previousEpoch, let from, let through, let horizon):
            serve(to: to, epoch: epoch, previousEpoch: previousEpoch, from: from, through: through, horizon: horizon)
        case .append(let frames):
            let bytes = frames.flatMap(\.payload)
            appender.async { [self] in append(bytes, count: frames.count) }
        case .truncate(let lsn):
            appender.async { [self] in
                guard !state.withLock({ s in defer { s.stopped = true }; return s.stopped }) else { return }
                node.requestRestart(truncating: Int(id), after: lsn)
            }
        case .fence(let epoch):
            log.fence(epoch: epoch)
        case .grantLease(let now):
            let ttl = Int((node.configuration.leaseTTL + 999) / 1000)
            Task {
                if let lease = try? await etcd.grantLease(ttl: ttl) {
                    feed(.leaseGranted(lease: UInt64(bitPattern: lease), sentAt: now))
                }
            }
        case .renewLease(let lease, let now):
            Task {
                guard let alive = try? await etcd.keepAlive(Int64(bitPattern: lease)) else { return }
                feed(alive ? .leaseRenewed(lease: lease, sentAt: now) : .leaseLost(lease: lease))
            }
        case .campaign(let lease):
            guard shouldLead(self) else {
                feed(.campaignResult(epoch: nil))
                return
            }
            let (key, me) = (leaderKeyPath, node.configuration.node.name)
            Task {
                let epoch = try? await etcd.create(key, Array(me.utf8), lease: Int64(bitPattern: lease))
                feed(.campaignResult(epoch: epoch.map { UInt64($0) }))
            }
        case .resign(let epoch):
            let key = leaderKeyPath
            Task { try? await etcd.delete(key, ifCreatedAt: Int64(epoch)) }
        case .publish(let end):
            guard let lease = state.withLock({ $0.replica.currentLease }) else { return }
            let key = node.keys.progress(id, node.configuration.node)
            Task { try? await etcd.put(key, Array("\(end.epoch):\(end.lsn)".utf8), lease: Int64(bitPattern: lease)) }
        case .acknowledge(let ids):
            resolve(ids, failure: nil)
        case .refuse(let ids, let reason), .abandon(let ids, let reason):
            resolve(ids, failure: reason)
        case .halt(let reason):
            node.halt("partition \(id): \(reason)")
        case .settled(let version):
            let key = node.keys.settled(id)
            Task { try? await etcd.put(key, Array(String(version).utf8)) }
        }
    }

    /// Frames `from...through` of the local log, sent to `to` (a follower's fetch) — or, when compaction rewrote
    /// `from`, ``ReplicaMessage/compacted(epoch:through:)``, which stops that replica naming the fix.
    private func serve(to: NodeID, epoch: UInt64, previousEpoch: UInt64, from: UInt64, through: UInt64, horizon: UInt64) {
        let (log, id, me) = (log, id, node.configuration.node)
        // One job of the blocking pool reads the frames and sends them: no task waiting for a thread in between.
        BlockingThreads.shared.submit { [node] in
            var frames: [ReplicatedFrame] = []
            if through >= from {
                let batch: Log.FrameBatch
                // A leader's frames may be written and not fsynced yet (`through` says how far the replica serves).
                do {
                    batch = try log.frames(
                        from: from, through: through, maxBytes: 4 << 20, includingUnsynced: true, reader: to.description)
                } catch {
                    if (error as? CloudletError)?.code == .changeTokenExpired, let marker = log.compactionMarker {
                        ServerLog.warning(
                            "partition \(id): \(to) asks for frames from LSN \(from), which compaction rewrote (up to LSN "
                                + "\(marker.coveredThrough)): it must be re-seeded")
                        let message = ReplicaMessage.compacted(epoch: epoch, through: marker.coveredThrough)
                        node.sendBlocking(to: to, ReplicaEnvelope(log: id, from: me, message: message))
                        return
                    }
                    ServerLog.warning("partition \(id): cannot serve frames from LSN \(from) to \(to): \(error)")
                    return
                }
                // Checked as they were read (`batch.frames`): sent as they are stored. The batch stops at `through`
                // (frames written since are the next fetch's: stopping there keeps this follower's place where that
                // fetch starts — a batch read past it left the place past it, and the next fetch missed it).
                for f in batch.frames where f.lsn <= through {
                    frames.append(ReplicatedFrame(lsn: f.lsn, epoch: f.epoch, payload: Array(batch.bytes[f.range])))
                }
            }
            let message = ReplicaMessage.frames(
                epoch: epoch, previousEpoch: previousEpoch, frames: frames, leaderDurable: log.durableLSN,
                horizon: horizon)
            node.sendBlocking(to: to, ReplicaEnvelope(log: id, from: me, message: message))
        }
    }

    /// A follower's (or a catching-up candidate's) append: verbatim and applied here; fsynced by the log's
    /// committer and reported once durable by `syncWaiter`, while the appender goes on with the next batch.
    ///
    /// Before the append, every blob the frames' records reference is made present here (fetched from the leader
    /// if missing, fsynced and named, pinned until the frames are applied: ``ClusterNode/ensureBlobs(_:leader:)``),
    /// so a frame in this log — and so a durable LSN this node reports, which counts towards a quorum — never
    /// references a blob this node lacks, across crashes too (docs/replication.md, "Assets").
    private func append(_ bytes: [UInt8], count: Int) {
        let (leaderEpoch, leader) = state.withLock { s -> (UInt64?, NodeID?) in
            (s.stopped ? nil : s.replica.fence, s.replica.leaderKey?.node)
        }
        guard let leaderEpoch else { return }
        var pinned: [String] = []
        var decoded: Partition.FollowedFrames?
        if case .partition = target {
            do {
                decoded = try Partition.decodeFollowed(bytes, partition: id)
                pinned = try node.ensureBlobs(decoded!.assets, leader: leader)
            } catch {
                failedToFollow(count, error)
                return
            }
        }
        defer { node.store.assets.unpin(pinned) }
        let last: UInt64
        do { last = try target.appendFollowed(bytes, decoded: decoded, leaderEpoch: leaderEpoch) } catch {
            failedToFollow(count, error)
            return
        }
        syncWaiter.async { [self] in
            do {
                try target.waitApplied(last)
                reportDurable()
            } catch {
                appender.async { [self] in failedToFollow(count, error) }
            }
        }
    }

    /// The replica believes frames are in that are not (durably): its view of the log is wrong now. It starts again
    /// from what the log holds (the frames are fetched again) — unless the node is stopping anyway.
    private func failedToFollow(_ count: Int, _ error: any Error) {
        guard !state.withLock({ $0.stopped }) else { return }
        ServerLog.warning("partition \(id): appending \(count) frames failed (\(error)); resynchronizing")
        resynchronize()
    }

    private func resynchronize() {
        do {
            let history = try Self.epochHistory(of: log)
            let last = log.lastLSN
            state.withLock { s in
                for (lsn, waiters) in s.admitted {
                    s.abandoned[lsn] = "the node resynchronized its replication state"
                    for w in waiters { w.resume(throwing: Self.unavailable("the node resynchronized its replication state")) }
                }
                s.admitted = [:]
                s.reportedDurable = last
            }
            feed(.start(now: node.now(), lastLSN: last, history: history))
        } catch {
            node.halt("partition \(id): cannot read its own log to resynchronize: \(error)")
        }
    }

    private func resolve(_ ids: [UInt64], failure: String?) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            var out: [CheckedContinuation<Void, any Error>] = []
            for lsn in ids {
                out += s.admitted.removeValue(forKey: lsn) ?? []
                if let failure { s.abandoned[lsn] = failure } else { s.committed = max(s.committed, lsn) }
            }
            if failure == nil, let low = s.abandoned.keys.min(), low + 100_000 < s.committed {
                s.abandoned = s.abandoned.filter { $0.key + 100_000 >= s.committed }
            }
            return out
        }
        for w in waiters {
            if let failure { w.resume(throwing: Self.unavailable(failure)) } else { w.resume() }
        }
    }

    static func unavailable(_ reason: String) -> CloudletError {
        CloudletError(.serviceUnavailable, "not acknowledged: \(reason); retry")
    }

    // MARK: LogCommitGate

    func admit(lsn: UInt64, fence: UInt64) throws -> UInt64 {
        let now = node.now()
        let (actions, outcome) = state.withLock { s -> ([ReplicaAction], Result<UInt64, CloudletError>) in
            if s.stopped { return ([], .failure(Self.unavailable("the node is stopping"))) }
            let actions = s.replica.on(.write(id: lsn, payload: [], now: now))
            var epoch: UInt64?
            var refusal: String?
            for a in actions {
                if case .append(let frames) = a, frames.count == 1, frames[0].lsn == lsn { epoch = frames[0].epoch }
                if case .refuse(_, let reason) = a { refusal = reason }
            }
            if let refusal { return (actions, .failure(Self.unavailable(refusal))) }
            guard let epoch, epoch >= fence else {
                // The replica staged a frame the log will not take: its view is off; it starts again from the log.
                s.abandoned[lsn] = "the leader's replication state was out of step with its log"
                return (actions, .failure(Self.unavailable("partition \(id)'s leader state was out of step with its log")))
            }
            s.admitted[lsn] = []
            return (actions, .success(epoch))
        }
        // Anything else the write caused runs once the log's lock is released.
        let rest = actions.filter {
            if case .append = $0 { return false }
            if case .refuse = $0 { return false }
            return true
        }
        if !rest.isEmpty { Task { perform(rest) } }
        switch outcome {
        case .success(let epoch): return epoch
        case .failure(let error):
            if error.message.contains("out of step") { appender.async { [self] in resynchronize() } }
            throw error
        }
    }

    /// The committer wrote frames up to `lsn` and is about to fsync them: a leader serves its parked followers now,
    /// so that they fsync while it does (docs/replication.md, "Throughput").
    func framesWritten(through lsn: UInt64) {
        feed(.written(lsn: lsn, now: node.now()))
    }

    func waitCommittedBlocking(_ lsn: UInt64) throws {
        try ThreadBridge.wait { try await self.waitCommitted(lsn) }
    }

    /// How long a writer waits for its quorum before its answer is "unknown outcome" (the write may still commit).
    static let commitTimeout: Duration = .seconds(10)

    func waitCommitted(_ lsn: UInt64) async throws {
        reportDurable()
        let timeout = Task { [self] in
            try await Task.sleep(for: Self.commitTimeout)
            let late = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
                guard let waiting = s.admitted[lsn], !waiting.isEmpty else { return [] }
                s.admitted[lsn] = []
                return waiting
            }
            for w in late {
                w.resume(throwing: Self.unavailable("no quorum of replicas confirmed LSN \(lsn) within 10 s; its outcome is unknown"))
            }
        }
        defer { timeout.cancel() }
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            let outcome = state.withLock { s -> Result<Void, any Error>? in
                if let reason = s.abandoned[lsn] { return .failure(Self.unavailable(reason)) }
                guard s.admitted[lsn] != nil, lsn > s.committed else { return .success(()) }
                s.admitted[lsn]!.append(c)
                return nil
            }
            if let outcome { c.resume(with: outcome) }
        }
    }

    /// Fails every writer still waiting (the node is stopping), and those that come to wait later: a write staged
    /// here and not acknowledged has an unknown outcome now (it must not look committed because nobody waits for it).
    func stop() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, any Error>] in
            defer { s.admitted = [:] }
            s.stopped = true
            for lsn in s.admitted.keys where lsn > s.committed { s.abandoned[lsn] = "the node is stopping" }
            return s.admitted.values.flatMap { $0 }
        }
        for w in waiters { w.resume(throwing: Self.unavailable("the node is stopping")) }
    }
}

/// Warnings of the cluster's shell, on standard error.
enum ServerLog {
    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("cloudlet: warning: \(message)\n".utf8))
    }
    static func note(_ message: String) {
        FileHandle.standardError.write(Data("cloudlet: \(message)\n".utf8))
    }
}

extension PartitionDriver {
    /// The node's lease for this partition, once granted.
    var currentLease: UInt64? { state.withLock { $0.replica.currentLease } }
}
