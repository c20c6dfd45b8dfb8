import Cloudlet
import CloudletCore
import CloudletReplication
import Synchronization

/// Which node should lead, as operators steer it (`cloudlet cluster drain|undrain|promote`): etcd keys
/// `<prefix>/drained/<node>` (the node should not lead while another replica can) and `<prefix>/preferred` (the node
/// that should lead whenever it can). Elections stay the replicas' own (``Replica``); preferences only decide whether
/// this node campaigns and whether, leading, it hands over — so they can delay leadership, never break safety.
public struct LeadershipPreferences: Sendable, Equatable {
    public var drained: Set<NodeID> = []
    public var preferred: NodeID?

    public init(drained: Set<NodeID> = [], preferred: NodeID? = nil) {
        self.drained = drained
        self.preferred = preferred
    }

    /// How many LSNs a preferred node may trail the leader for the leader to hand over to it (the new leader catches
    /// up the rest from the others while it is a candidate; a short gap keeps the handover short).
    public static let handoverLag: UInt64 = 256

    /// Whether `me` should lead (or campaign) now. `live` maps each live replica to its published durable LSN;
    /// `leaderlessFor` is how long the log has had no leader (ms), `grace` how long a preference may keep it so.
    ///
    /// - A drained node does not lead while another live replica is not drained.
    /// - While a preferred node is live and not drained, no other node campaigns, and a leader hands over once the
    ///   preferred node trails it by at most ``handoverLag``.
    /// - Either rule gives way when the log has been leaderless for longer than `grace`: a preference must never
    ///   leave a partition without a leader (the preferred node may be unable to win).
    public func allows(
        _ me: NodeID, leading: Bool, ownDurable: UInt64, live: [NodeID: UInt64], leaderlessFor: Millis, grace: Millis
    ) -> Bool {
        if !leading && leaderlessFor > grace { return true }
        let eligible = live.keys.filter { $0 != me && !drained.contains($0) }
        if drained.contains(me) { return eligible.isEmpty }
        guard let preferred, preferred != me, eligible.contains(preferred), let theirs = live[preferred] else { return true }
        if leading { return theirs + Self.handoverLag < ownDurable }
        return false
    }

    /// The preferences in a listing of the cluster's etcd keys.
    init(keys: ClusterConfiguration.Keys, listing: [EtcdClient.KeyValue]) {
        for kv in listing {
            if kv.key.hasPrefix(keys.drained) {
                drained.insert(NodeID(String(kv.key.dropFirst(keys.drained.count))))
            } else if kv.key == keys.preferred, !kv.value.isEmpty {
                preferred = NodeID(String(decoding: kv.value, as: UTF8.self))
            }
        }
    }
}

extension ClusterNode {
    /// Whether this node should lead partition 0 (the others, and the catalog, follow it) now.
    func mayLead(_ driver: PartitionDriver) -> Bool {
        let s = driver.status
        let leaderlessFor = observeLeadership(s)
        var live: [NodeID: UInt64] = [:]
        for (node, end) in s.progress { live[node] = end.lsn }
        var leading = false
        if case .leader = s.role { leading = true }
        return preferences.withLock { $0 }.allows(
            configuration.node, leading: leading, ownDurable: s.durable.lsn, live: live, leaderlessFor: leaderlessFor,
            grace: 2 * configuration.leaseTTL)
    }

    /// How long (ms) partition 0 has been without a leader, as of `status`; called every tick so that a leader seen
    /// between two campaigns resets the count.
    @discardableResult
    func observeLeadership(_ status: PartitionDriver.Status) -> Millis {
        let now = now()
        return leaderless.withLock { since -> Millis in
            if status.leader != nil {
                since = nil
                return 0
            }
            let start = since ?? now
            since = start
            return now - start
        }
    }
}

/// Where a node is with the share repair of its leadership (``ClusterNode/repairSharesWhenLeading()``).
struct ShareRepair: Sendable {
    /// Done for the current leadership.
    var done = false
    var running = false
    /// Counts the times the node stopped leading every partition: a repair that ran across one is not counted done.
    var losses = 0
}

extension ClusterNode {
    /// Once per leadership — when this node comes to lead every partition and the catalog, and again after a failure
    /// — brings the catalog's shares in line with the zones' share records through the replicated logs
    /// (``CloudletStore/reconcileShareRecordsAsLeader()``): the open-time repair, which a replica cannot run, so that
    /// a leader that crashed between a share's two commits, or a follower promoted with its catalog behind its
    /// partitions, leaves no replica's access checks out of line with the share records. Called every tick.
    func repairSharesWhenLeading() {
        let leads = leadsEveryPartition
        let start = shareRepair.withLock { s -> Int? in
            guard leads else {
                if s.done || s.running { s.losses += 1 }
                s.done = false
                return nil
            }
            guard !s.done, !s.running else { return nil }
            s.running = true
            return s.losses
        }
        guard let losses = start else { return }
        let store = self.store
        Task { [self] in
            var ok = false
            do {
                try await store.reconcileShareRecordsAsLeader()
                ok = true
            } catch {
                ServerLog.warning("cluster \(configuration.name): the new leader's share repair failed (\(error)); trying again")
            }
            shareRepair.withLock { s in
                s.running = false
                if ok && s.losses == losses { s.done = true }
            }
        }
    }
}
