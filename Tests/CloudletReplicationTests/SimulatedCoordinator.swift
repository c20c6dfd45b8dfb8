import CloudletReplication

/// etcd, as far as the protocol uses it: a revision counter, leases that expire `ttl` after their last keep-alive,
/// one lease-backed leader key created by compare-and-swap (its create revision is the epoch), and the replicas'
/// published log ends under their leases. Requests and watch notifications travel over the simulated network
/// (``Simulation``), so they are delayed, dropped and cut off like any message.
struct SimulatedCoordinator {
    struct Lease {
        var owner: NodeID
        var expiry: Millis
    }

    let ttl: Millis
    private(set) var revision: UInt64 = 1
    private(set) var leases: [UInt64: Lease] = [:]
    private var nextLease: UInt64 = 100
    private(set) var leaderKey: LeaderKey?
    private(set) var progress: [NodeID: (end: LogEnd, lease: UInt64)] = [:]

    init(ttl: Millis) { self.ttl = ttl }

    /// Expires the leases whose time has come, deleting what they held; true if the leader key went with them.
    mutating func expire(now: Millis) -> Bool {
        let dead = leases.filter { $0.value.expiry <= now }.map(\.key)
        guard !dead.isEmpty else { return false }
        for id in dead { leases[id] = nil }
        progress = progress.filter { leases[$0.value.lease] != nil }
        if let key = leaderKey, leases[key.lease] == nil {
            leaderKey = nil
            revision += 1
            return true
        }
        return false
    }

    mutating func grant(to node: NodeID, now: Millis) -> UInt64 {
        nextLease += 1
        leases[nextLease] = Lease(owner: node, expiry: now + ttl)
        revision += 1
        return nextLease
    }

    /// A keep-alive: true if the lease lives (and now lives `ttl` longer).
    mutating func renew(_ lease: UInt64, now: Millis) -> Bool {
        guard leases[lease] != nil else { return false }
        leases[lease]!.expiry = now + ttl
        return true
    }

    /// The campaign's transaction: `if create_revision(leader) == 0 then put(leader, node, lease)`. Returns the
    /// epoch (the revision of the put) if it won.
    mutating func campaign(_ node: NodeID, lease: UInt64) -> UInt64? {
        guard leaderKey == nil, let l = leases[lease], l.owner == node else { return nil }
        revision += 1
        leaderKey = LeaderKey(node: node, epoch: revision, lease: lease)
        return revision
    }

    /// `if create_revision(leader) == epoch then delete(leader)`: true if it deleted the key.
    mutating func resign(epoch: UInt64) -> Bool {
        guard leaderKey?.epoch == epoch else { return false }
        leaderKey = nil
        revision += 1
        return true
    }

    mutating func publish(_ node: NodeID, _ end: LogEnd, lease: UInt64) {
        guard leases[lease] != nil else { return }
        progress[node] = (end, lease)
        revision += 1
    }

    var publishedProgress: [NodeID: LogEnd] { progress.mapValues(\.end) }
}
