import CloudletCore

/// The replication protocol of one partition on one node, as a state machine without I/O: the shell feeds it
/// ``ReplicaEvent``s (its clock, the coordinator's watch, messages, log completions) through ``on(_:)`` and performs
/// the ``ReplicaAction``s it returns. Randomness comes from ``ReplicaConfiguration/seed``; time only from events.
/// docs/replication.md describes the protocol and what it guarantees.
///
/// Roles: a **follower** tails the leader the coordinator names; a **candidate** has won the leader key (epoch =
/// the key's create revision) and is fencing a majority and catching up to the most complete log among them; a
/// **leader** stages writes under its epoch and acknowledges them per ``AckMode``.
public struct Replica: Sendable {
    /// Its replica set changes with ``ReplicaEvent/membership(replicas:version:)``.
    public internal(set) var configuration: ReplicaConfiguration
    var rng: SplitMix64
    var now: Millis = 0
    var halted: String?

    // The local log, as far as the protocol knows it.
    /// The last frame appended (maybe not fsynced yet).
    public internal(set) var lastLSN: UInt64 = 0
    /// The last frame fsynced.
    public internal(set) var durableLSN: UInt64 = 0
    /// The last frame written to the local log's files (readable, maybe not fsynced yet): a leader serves its
    /// followers up to here, so they fsync its frames while it does (``servableLSN``).
    public internal(set) var writtenLSN: UInt64 = 0
    public internal(set) var history = EpochHistory()
    /// The highest epoch seen or fenced: frames and leaders of older epochs are refused.
    public internal(set) var fence: UInt64 = 0
    /// Who fenced us at ``fence`` (a candidate catching up may fetch from us).
    var fencedBy: NodeID?
    /// The compaction horizon: every replica of the partition holds frames `1...compactionHorizon`, fsynced and equal
    /// to this node's, so none will ever need them from another (and none is ever truncated). The leader computes it
    /// from its followers' matched positions (all of them: a replica it has not heard from in its epoch keeps it
    /// where it was); followers learn it with the frames they fetch. The shell compacts the log only up to it. It
    /// only grows, and survives a ``ReplicaEvent/start(now:lastLSN:history:)``.
    public internal(set) var compactionHorizon: UInt64 = 0

    /// The version (coordinator revision) of the replica set in ``configuration`` (0: the one the node started with).
    public internal(set) var membershipVersion: UInt64 = 0
    /// As leader: the replica set's version to report settled once a majority of it has matched up to the LSN.
    var unsettled: (version: UInt64, lsn: UInt64)?

    // The coordinator.
    var lease: UInt64?
    var grantRequestedAt: Millis?
    var lastRenewSent: Millis = 0
    /// Until when the lease certainly lives, minus the clock-skew margin.
    var leaseSafeUntil: Millis = 0
    public internal(set) var leaderKey: LeaderKey?
    var progress: [NodeID: LogEnd] = [:]
    /// The log end last published under the lease, and when.
    var published: LogEnd?
    var publishedAt: Millis = 0
    var campaignAt: Millis?
    var campaigning = false
    var campaignSentAt: Millis = 0
    var lastResignSent: Millis = 0

    // Following.
    var fetchSentAt: Millis?

    public enum Role: Hashable, Sendable {
        case follower
        case candidate(epoch: UInt64)
        case leader(epoch: UInt64)
    }
    public internal(set) var role = Role.follower
    var candidate = CandidateState()
    var leader = LeaderState()

    struct CandidateState {
        /// Fenced replicas and where their logs end (this node's own entry is added when it counts).
        var replies: [NodeID: LogEnd] = [:]
        var fenceSentAt: Millis = 0
        /// The replica being caught up from, and where its log ends.
        var source: (node: NodeID, end: LogEnd)?
    }

    struct LeaderState {
        /// The first LSN of this leadership.
        var startLSN: UInt64 = 0
        /// Per follower: how far its log is fsynced and known to match this leader's.
        var matched: [NodeID: UInt64] = [:]
        /// Fetches waiting for frames to become durable: follower → from.
        var parked: [NodeID: UInt64] = [:]
        /// Per follower: where the last frames sent to it started, and when (a second fetch from there within a
        /// retry interval gets no second copy).
        var served: [NodeID: (from: UInt64, at: Millis)] = [:]
        /// Writes staged and not yet acknowledged, in LSN order.
        var pending: [(lsn: UInt64, id: UInt64)] = []
    }

    public init(configuration: ReplicaConfiguration) {
        precondition(configuration.replicas.contains(configuration.node), "\(configuration.node) is not a replica")
        precondition(configuration.clockSkewMargin < configuration.leaseTTL)
        self.configuration = configuration
        rng = SplitMix64(seed: configuration.seed)
    }

    var me: NodeID { configuration.node }
    var others: [NodeID] { configuration.replicas.filter { $0 != me } }
    /// Where the local log ends, fsynced.
    public var durableEnd: LogEnd { LogEnd(epoch: history.epoch(at: durableLSN), lsn: durableLSN) }
    /// Whether this node may act as leader now: it holds a lease that certainly has not expired.
    var leaseIsSafe: Bool { lease != nil && now < leaseSafeUntil }
    /// The epoch this node leads (or is a candidate for), if any.
    public var ownEpoch: UInt64? {
        switch role {
        case .follower: return nil
        case .candidate(let e), .leader(let e): return e
        }
    }
    /// The node's coordinator lease, once granted.
    public var currentLease: UInt64? { lease }
    /// Why the node stopped, if it did.
    public var haltReason: String? { halted }

    // MARK: Events

    /// Handles one event; returns what the shell must do, in order.
    public mutating func on(_ event: ReplicaEvent) -> [ReplicaAction] {
        guard halted == nil else { return [] }
        var out: [ReplicaAction] = []
        switch event {
        case .start(let now, let lastLSN, let history):
            let (horizon, version) = (compactionHorizon, membershipVersion)
            self = Replica(configuration: configuration)
            compactionHorizon = min(horizon, lastLSN)
            membershipVersion = version
            self.now = now
            self.lastLSN = lastLSN
            durableLSN = lastLSN
            writtenLSN = lastLSN
            self.history = history
            fence = history.epoch(at: lastLSN)
            grantRequestedAt = now
            out.append(.grantLease(now: now))
        case .tick(let now):
            self.now = max(self.now, now)
            onTick(&out)
        case .leaseGranted(let lease, let sentAt):
            // A second grant (an answer to a retried request) is left to expire.
            guard self.lease == nil else { break }
            self.lease = lease
            // What was published lived under the previous lease (if any): publish again under this one.
            published = nil
            lastRenewSent = sentAt
            leaseSafeUntil = sentAt + configuration.leaseTTL - configuration.clockSkewMargin
            grantRequestedAt = nil
        case .leaseRenewed(let lease, let sentAt):
            if lease == self.lease {
                leaseSafeUntil = max(leaseSafeUntil, sentAt + configuration.leaseTTL - configuration.clockSkewMargin)
            }
        case .leaseLost(let lease):
            guard lease == self.lease else { break }
            self.lease = nil
            stepDown("the coordinator lease lapsed", &out)
            grantRequestedAt = now
            out.append(.grantLease(now: now))
        case .leaderKey(let key):
            onLeaderKey(key, &out)
        case .progress(let published):
            progress = published
        case .campaignResult(let epoch):
            campaigning = false
            campaignAt = nil
            if let epoch { becomeCandidate(epoch, &out) }
        case .receive(let from, let message, let now):
            self.now = max(self.now, now)
            onMessage(from, message, &out)
        case .durable(let lsn, let now):
            self.now = max(self.now, now)
            durableLSN = max(durableLSN, min(lsn, lastLSN))
            writtenLSN = max(writtenLSN, durableLSN)
            onDurable(&out)
        case .written(let lsn, let now):
            self.now = max(self.now, now)
            let written = max(writtenLSN, min(lsn, lastLSN))
            guard written > writtenLSN else { break }
            writtenLSN = written
            serveParked(&out)
        case .write(let id, let payload, let now):
            self.now = max(self.now, now)
            onWrite(id, payload, &out)
        case .membership(let replicas, let version):
            onMembership(replicas, version: version, &out)
        }
        return out
    }

    private mutating func onMembership(_ replicas: [NodeID], version: UInt64, _ out: inout [ReplicaAction]) {
        guard version > membershipVersion else { return }
        guard replicas.contains(me) else {
            halted =
                "\(me) was removed from the replica set (now \(replicas.map(\.name).joined(separator: ", "))): it no longer "
                + "holds this data for the cluster"
            out.append(.halt(reason: halted!))
            return
        }
        membershipVersion = version
        configuration.replicas = replicas
        candidate.replies = candidate.replies.filter { replicas.contains($0.key) }
        leader.matched = leader.matched.filter { replicas.contains($0.key) }
        leader.parked = leader.parked.filter { replicas.contains($0.key) }
        progress = progress.filter { replicas.contains($0.key) }
        guard case .leader = role else {
            evaluateCandidacy(&out)
            return
        }
        unsettled = (version, lastLSN)
        acknowledge(&out)
        advanceHorizon()
    }

    /// The LSN a majority of the replica set has fsynced and matched (the leader's own fsynced log included).
    var quorumMatched: UInt64 {
        let positions = ([durableLSN] + others.map { leader.matched[$0] ?? 0 }).sorted(by: >)
        return positions[configuration.quorum - 1]
    }

    /// Reports the replica set settled once a majority of it holds what the log held when the leader learned of it.
    mutating func settle(_ out: inout [ReplicaAction]) {
        guard case .leader = role, let pending = unsettled, quorumMatched >= pending.lsn else { return }
        unsettled = nil
        out.append(.settled(version: pending.version))
    }

    private mutating func onTick(_ out: inout [ReplicaAction]) {
        // Requests to the coordinator whose answer may have been lost are sent again.
        if lease == nil, now >= (grantRequestedAt ?? 0) + configuration.retryInterval {
            grantRequestedAt = now
            out.append(.grantLease(now: now))
        }
        if let key = leaderKey, key.node == me, ownEpoch != key.epoch, !campaigning,
            now >= lastResignSent + configuration.retryInterval
        {
            lastResignSent = now
            out.append(.resign(epoch: key.epoch))
        }
        if let lease, now >= lastRenewSent + configuration.renewInterval {
            lastRenewSent = now
            out.append(.renewLease(lease: lease, now: now))
        }
        // The durable end is published when it moves, at most once per `publishInterval` while it only grows
        // within an epoch (each publish is a put the coordinator commits and fsyncs); at once when there is none
        // under this lease yet or its epoch changed. Elections read it only once a leader key is gone, a lease
        // TTL after the last renewal, by when the last end has long been published.
        if lease != nil, published != durableEnd {
            let sameEpoch = published.map { $0.epoch == durableEnd.epoch } ?? false
            if !sameEpoch || now >= publishedAt + configuration.publishInterval {
                published = durableEnd
                publishedAt = now
                out.append(.publish(durableEnd))
            }
        }
        switch role {
        case .leader:
            if !leaseIsSafe { stepDown("its lease could lapse before it is renewed", &out) }
        case .candidate(let epoch):
            if !leaseIsSafe {
                stepDown("its lease could lapse before it is renewed", &out)
            } else if now >= candidate.fenceSentAt + configuration.retryInterval {
                candidate.fenceSentAt = now
                for node in others where candidate.replies[node] == nil { out.append(.send(to: node, .fence(epoch: epoch))) }
                if candidate.source != nil { fetchSentAt = nil }
                evaluateCandidacy(&out)
            }
        case .follower:
            if let sent = fetchSentAt, now < sent + configuration.retryInterval { break }
            sendFetch(&out)
        }
        scheduleCampaign(&out)
    }

    private mutating func scheduleCampaign(_ out: inout [ReplicaAction]) {
        // A campaign whose request or answer was lost: try again (if it won, the watch says so meanwhile).
        if campaigning, now >= campaignSentAt + configuration.leaseTTL {
            campaigning = false
            campaignAt = nil
        }
        guard leaderKey == nil, role == .follower, leaseIsSafe, let lease, !campaigning else {
            if leaderKey != nil { campaignAt = nil }
            return
        }
        guard let at = campaignAt else {
            // The most caught-up live replica (by what the replicas published) campaigns first; the others wait
            // longer, so that the election usually needs no catching up.
            let mine = durableEnd
            let behind = progress.contains { $0.key != me && $0.value > mine }
            let jitter = configuration.electionJitter
            campaignAt = now + (behind ? jitter : 0) + rng.next() % max(jitter, 1)
            return
        }
        if now >= at {
            campaigning = true
            campaignSentAt = now
            out.append(.campaign(lease: lease))
        }
    }

    private mutating func onLeaderKey(_ key: LeaderKey?, _ out: inout [ReplicaAction]) {
        leaderKey = key
        guard let key else {
            if ownEpoch != nil { stepDown("the leader key is gone", &out) }
            return
        }
        campaignAt = nil
        if key.node == me {
            if ownEpoch == key.epoch { return }
            // The watch can tell of a won campaign before (or instead of) its answer.
            if campaigning && key.lease == lease {
                campaigning = false
                becomeCandidate(key.epoch, &out)
                return
            }
            // Ours from before a restart (or a stale leadership): give it up so that an election can follow.
            out.append(.resign(epoch: key.epoch))
            return
        }
        if let own = ownEpoch, own < key.epoch { stepDown("\(key) leads now", &out) }
        raiseFence(key.epoch, by: key.node, &out)
        if role == .follower && key.epoch == fence {
            fetchSentAt = nil
            sendFetch(&out)
        }
    }

    /// Refuses older epochs from now on.
    private mutating func raiseFence(_ epoch: UInt64, by node: NodeID, _ out: inout [ReplicaAction]) {
        guard epoch > fence else { return }
        fence = epoch
        fencedBy = node
        out.append(.fence(epoch: epoch))
        if let own = ownEpoch, own < epoch { stepDown("epoch \(epoch) fenced it", &out) }
    }

    /// Leaves leadership or candidacy: writes not yet acknowledged get an unknown outcome.
    mutating func stepDown(_ why: String, _ out: inout [ReplicaAction]) {
        guard let epoch = ownEpoch else { return }
        let pending = leader.pending.map(\.id)
        if !pending.isEmpty { out.append(.abandon(ids: pending, reason: "\(me) stopped leading epoch \(epoch): \(why)")) }
        role = .follower
        leader = LeaderState()
        candidate = CandidateState()
        fetchSentAt = nil
        // A compare-and-swap on the epoch: harmless when the key is gone or someone else's already.
        out.append(.resign(epoch: epoch))
    }

    private mutating func becomeCandidate(_ epoch: UInt64, _ out: inout [ReplicaAction]) {
        if ownEpoch == epoch { return }
        guard epoch > fence, leaseIsSafe, role == .follower else {
            out.append(.resign(epoch: epoch))
            return
        }
        fence = epoch
        fencedBy = me
        out.append(.fence(epoch: epoch))
        role = .candidate(epoch: epoch)
        candidate = CandidateState(replies: [:], fenceSentAt: now, source: nil)
        fetchSentAt = nil
        for node in others { out.append(.send(to: node, .fence(epoch: epoch))) }
        evaluateCandidacy(&out)
    }

    private mutating func onDurable(_ out: inout [ReplicaAction]) {
        switch role {
        case .follower:
            // Tell the leader at once: it counts fsynced frames towards quorum acknowledgement.
            if leaderKey != nil { sendFetch(&out) }
        case .candidate:
            if candidate.source != nil { sendFetch(&out) }
            evaluateCandidacy(&out)
        case .leader:
            serveParked(&out)
            acknowledge(&out)
            advanceHorizon()
        }
    }

    /// The last frame this node may serve: a leader, every frame written to its log (Raft's order: it ships frames
    /// while it fsyncs them, and counts its own fsync as one vote like any replica's); anyone else, only fsynced
    /// frames (a candidate catching up must not take frames the replica could still lose).
    public var servableLSN: UInt64 {
        guard case .leader = role else { return durableLSN }
        return max(durableLSN, min(writtenLSN, lastLSN))
    }

    /// As leader, answers the parked fetches that the log now has frames for.
    private mutating func serveParked(_ out: inout [ReplicaAction]) {
        guard case .leader(let epoch) = role else { return }
        for (node, from) in leader.parked.sorted(by: { $0.key < $1.key }) where from <= servableLSN {
            leader.parked[node] = nil
            leader.served[node] = (from, now)
            out.append(serve(node, epoch: epoch, from: from))
        }
    }

    /// A leader raises the compaction horizon to the lowest position every follower has fsynced and matched in
    /// its epoch (and it has fsynced itself); while one follower has not fetched in this epoch, it stays.
    mutating func advanceHorizon() {
        guard case .leader = role else { return }
        var horizon = durableLSN
        for node in others {
            guard let matched = leader.matched[node] else { return }
            horizon = min(horizon, matched)
        }
        compactionHorizon = max(compactionHorizon, horizon)
    }

    private mutating func onWrite(_ id: UInt64, _ payload: [UInt8], _ out: inout [ReplicaAction]) {
        guard case .leader(let epoch) = role, leaseIsSafe else {
            let reason = leaderKey.map { "\(me) is not the leader; \($0) is" } ?? "the partition has no leader"
            out.append(.refuse(ids: [id], reason: reason))
            return
        }
        lastLSN += 1
        history.record(epoch: epoch, at: lastLSN)
        leader.pending.append((lastLSN, id))
        out.append(.append([ReplicatedFrame(lsn: lastLSN, epoch: epoch, payload: payload)]))
    }

    /// Acknowledges the pending writes the ack mode allows.
    mutating func acknowledge(_ out: inout [ReplicaAction]) {
        settle(&out)
        guard case .leader = role, leaseIsSafe, !leader.pending.isEmpty else { return }
        let committed: UInt64
        switch configuration.ackMode {
        case .leader:
            committed = durableLSN
        case .quorum:
            committed = quorumMatched
        }
        // Only frames of this leadership count (Raft's rule: older frames commit with the first of ours).
        let ready = leader.pending.prefix { $0.lsn <= committed && $0.lsn >= leader.startLSN }
        guard !ready.isEmpty else { return }
        leader.pending.removeFirst(ready.count)
        out.append(.acknowledge(ids: ready.map(\.id)))
    }
}
