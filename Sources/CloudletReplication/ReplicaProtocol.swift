/// What replicas of a partition say to each other (the server carries them over HTTP under `/cloudlet/`; the
/// simulation over its network). Every message names the epoch it belongs to; a message of another epoch than the
/// receiver's is ignored or answered with ``notLeader(epoch:)``.
public enum ReplicaMessage: Hashable, Sendable {
    /// A follower (or a candidate catching up) asks for the frames from `from` on. `previous` is its frame
    /// `from - 1` (LSN and epoch: the consistency check), `durable` how far its log is fsynced — the leader counts
    /// it towards quorum acknowledgement once the check passed.
    case fetch(epoch: UInt64, from: UInt64, previousEpoch: UInt64, durable: UInt64)
    /// Frames for a fetch, consecutive, following the frame `previousEpoch` of the fetch (the receiver appends
    /// them only if its log still ends with that frame: an answer to an older fetch is dropped); `leaderDurable` is
    /// how far the sender's log is fsynced; `horizon` its ``Replica/compactionHorizon`` (every replica holds frames
    /// `1...horizon`, fsynced and equal), which the receiver may compact up to.
    case frames(epoch: UInt64, previousEpoch: UInt64, frames: [ReplicatedFrame], leaderDurable: UInt64, horizon: UInt64)
    /// The fetch from `from` whose previous frame had `previousEpoch` does not match: the sender's latest epoch not
    /// after the follower's is `agreedEpoch`, ending at `agreedLSN` (capped at `from - 1`). The follower truncates
    /// — only if its log still ends where that fetch said — and fetches again.
    case diverged(epoch: UInt64, from: UInt64, previousEpoch: UInt64, agreedEpoch: UInt64, agreedLSN: UInt64)
    /// The follower holds frames of the leader's own epoch that the leader does not: impossible unless there is a
    /// bug; the follower stops.
    case ahead(epoch: UInt64, leaderLastLSN: UInt64)
    /// A new leader (still a candidate) fences the replicas: from now on they refuse frames of older epochs and
    /// stop following an older leader; they answer with ``fenced(epoch:end:)``.
    case fence(epoch: UInt64)
    /// Fenced at `epoch`; the replica's log ends (fsynced) at `end`.
    case fenced(epoch: UInt64, end: LogEnd)
    /// The receiver does not lead `epoch` (any more): the sender waits for the coordinator to tell it who does.
    case notLeader(epoch: UInt64)
    /// The fetch asked for frames the sender's log no longer holds as written: compaction rewrote LSNs
    /// `1...through`. Never happens to a replica of the partition unless it lost its disk (compaction stays below
    /// the horizon every replica holds): the receiver stops, naming the fix (re-seed it from another replica).
    case compacted(epoch: UInt64, through: UInt64)
}

/// What happened: everything a ``Replica`` learns comes in as one of these (the shell's I/O completions, the
/// coordinator's watch, messages, the clock).
public enum ReplicaEvent: Hashable, Sendable {
    /// The node (re)started with this log (durable frames only: what survived).
    case start(now: Millis, lastLSN: UInt64, history: EpochHistory)
    /// Time passed.
    case tick(now: Millis)
    /// The coordinator granted a lease to the request sent at `sentAt` (``ReplicaAction/grantLease(now:)``): it lives
    /// at least until `sentAt + leaseTTL` on the coordinator's clock.
    case leaseGranted(lease: UInt64, sentAt: Millis)
    /// A keep-alive sent at `sentAt` succeeded: the lease lives at least until `sentAt + leaseTTL` on the
    /// coordinator's clock.
    case leaseRenewed(lease: UInt64, sentAt: Millis)
    /// The coordinator says the lease is gone (expired or revoked).
    case leaseLost(lease: UInt64)
    /// The coordinator's leader key for the partition, as the watch last reported it (nil: no leader).
    case leaderKey(LeaderKey?)
    /// The replicas' published log ends (each under its node's lease; a node whose lease expired is absent).
    case progress([NodeID: LogEnd])
    /// The campaign's compare-and-swap: won at `epoch` (the revision that created the key), or lost (nil).
    case campaignResult(epoch: UInt64?)
    /// A message from another replica, handled at `now` (every event that can lead to an acknowledgement carries
    /// the clock, so that the lease is judged by the time of the decision, not of the last tick).
    case receive(from: NodeID, ReplicaMessage, now: Millis)
    /// The local log has every frame up to `lsn` fsynced.
    case durable(lsn: UInt64, now: Millis)
    /// The local log has every frame up to `lsn` written (readable from its files), not necessarily fsynced: a
    /// leader may ship them to its followers now. Optional — a shell that reports only ``durable(lsn:now:)`` gets
    /// the old order (the leader's fsync, then the followers').
    case written(lsn: UInt64, now: Millis)
    /// A client write to stage (leader) or refuse (anyone else).
    case write(id: UInt64, payload: [UInt8], now: Millis)
    /// The coordinator's replica set, changed by an operator (`cloudlet cluster remove`), `version` the revision
    /// that wrote it. One replica is taken out at a time, and only once the previous change is settled
    /// (``ReplicaAction/settled(version:)``): any majority of the old set and any of the new one then share a
    /// replica, so nodes may learn of the change at different moments. A node no longer in the set halts.
    case membership(replicas: [NodeID], version: UInt64)
}

/// What to do: the shell performs these, in order.
public enum ReplicaAction: Hashable, Sendable {
    case send(to: NodeID, ReplicaMessage)
    /// Read the local log's frames `from...through` (a leader's: written, maybe not fsynced yet — see
    /// ``Replica/servableLSN``; anyone else's: fsynced) and send them to `to` as
    /// ``ReplicaMessage/frames(epoch:previousEpoch:frames:leaderDurable:horizon:)`` of `epoch` (`through < from`:
    /// none) with `horizon`. If the log no longer holds `from` as written (compacted), send
    /// ``ReplicaMessage/compacted(epoch:through:)`` instead.
    case serveFrames(to: NodeID, epoch: UInt64, previousEpoch: UInt64, from: UInt64, through: UInt64, horizon: UInt64)
    /// Append these frames (consecutive, after the log's last) and fsync them; report with
    /// ``ReplicaEvent/durable(lsn:now:)``. A leader's own frames, or a leader's frames verbatim.
    case append([ReplicatedFrame])
    /// Remove the frames after `lsn` (a divergent suffix), durably, before anything else is appended.
    case truncate(after: UInt64)
    /// Refuse frames of epochs before `epoch` in the local log from now on.
    case fence(epoch: UInt64)
    /// Ask the coordinator for a lease, stamped `now` (reported back in ``ReplicaEvent/leaseGranted(lease:sentAt:)``).
    case grantLease(now: Millis)
    /// Send a keep-alive for `lease`, stamped `now` (reported back in ``ReplicaEvent/leaseRenewed(lease:sentAt:)``).
    case renewLease(lease: UInt64, now: Millis)
    /// Compare-and-swap in the coordinator: create the leader key naming this node under `lease` if there is none.
    case campaign(lease: UInt64)
    /// Delete the leader key if it still is the one of `epoch` (compare-and-swap on its create revision).
    case resign(epoch: UInt64)
    /// Publish the local log's fsynced end under the node's lease.
    case publish(LogEnd)
    /// Tell the clients of these writes that they are committed.
    case acknowledge(ids: [UInt64])
    /// Tell the clients of these writes that they failed (`SERVICE_UNAVAILABLE`, retry: not the leader, or the lease
    /// is about to lapse). A refused write was never staged.
    case refuse(ids: [UInt64], reason: String)
    /// Tell the clients of these writes that their outcome is unknown: they were staged, then this node stopped
    /// leading before a quorum had them. The next leader may or may not hold them (retry idempotently).
    case abandon(ids: [UInt64], reason: String)
    /// Stop the node: an invariant of the protocol broke (never happens unless there is a bug), or the node was
    /// removed from the replica set.
    case halt(reason: String)
    /// As leader, a majority of the replica set of `version` has fsynced and matched everything this leader's log
    /// held when it learned of that set: every acknowledged write is on a majority of it, so another replica may
    /// be taken out. Record it in the coordinator.
    case settled(version: UInt64)
}

/// The timing and shape of a partition's replication. Every default is the production setting.
public struct ReplicaConfiguration: Hashable, Sendable {
    /// This node.
    public var node: NodeID
    /// Every replica of the partition, this node included.
    public var replicas: [NodeID]
    /// Default ``AckMode/quorum``.
    public var ackMode: AckMode = .quorum
    /// The coordinator lease's time to live. Default 5 000 ms.
    public var leaseTTL: Millis = 5_000
    /// How often the lease is renewed. Default 1 000 ms (TTL / 5).
    public var renewInterval: Millis = 1_000
    /// How much the node's clock may run slow against the coordinator's over one TTL: a leader stops acknowledging
    /// once `leaseTTL - clockSkewMargin` have passed since its last successful renewal was sent. Default 1 000 ms.
    public var clockSkewMargin: Millis = 1_000
    /// A fetch (or a fence) without an answer is sent again after this long. Default 500 ms.
    public var retryInterval: Millis = 500
    /// A node waits up to this long (at random) before it campaigns for a free leader key, less when it is the most
    /// caught-up replica. Default 300 ms.
    public var electionJitter: Millis = 300
    /// How often, at most, a durable end that moves within one epoch is published to the coordinator (the
    /// replicas' progress: status, lag metrics, who campaigns first). Default 500 ms.
    public var publishInterval: Millis = 500
    /// Frames per ``ReplicaMessage/frames(epoch:previousEpoch:frames:leaderDurable:horizon:)``. Default 256.
    public var maxFramesPerFetch: UInt64 = 256
    /// Seeds the node's randomness (election jitter).
    public var seed: UInt64 = 0

    public init(node: NodeID, replicas: [NodeID]) {
        self.node = node
        self.replicas = replicas
    }

    /// How many replicas make a majority.
    public var quorum: Int { replicas.count / 2 + 1 }
}
