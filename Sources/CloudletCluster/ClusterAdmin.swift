import Cloudlet
import CloudletCore
import CloudletReplication

/// What `cloudlet cluster drain|undrain|promote` change: the operators' leadership preferences in etcd
/// (``LeadershipPreferences``). The nodes pick them up at their next poll of etcd and act on them.
public struct ClusterAdmin: Sendable {
    let etcd: EtcdClient
    let keys: ClusterConfiguration.Keys
    let name: String

    /// `etcd`: `etcd://host:port`; `name`: the cluster's key prefix (`--cluster-name`, default `cloudlet`).
    public init(etcd: String, name: String = "cloudlet") {
        self.etcd = EtcdClient(url: etcd)
        keys = ClusterConfiguration.Keys(name: name)
        self.name = name
    }

    /// The replica set, once the cluster formed. - Throws: `.invalidArguments` when it has not formed (yet).
    public func replicas() async throws -> [NodeID] {
        ClusterNode.replicaList(try await placement().value)
    }

    /// The preferences as etcd holds them now.
    public func preferences() async throws -> LeadershipPreferences {
        LeadershipPreferences(keys: keys, listing: try await etcd.list(prefix: keys.root))
    }

    /// Asks `node` to stop leading (it hands its partitions over to another replica and does not campaign while
    /// another undrained replica is live). Refuses to drain the last undrained replica unless `force`.
    public func drain(_ node: NodeID, force: Bool = false) async throws {
        let replicas = try await checkReplica(node)
        let current = try await preferences()
        let left = replicas.filter { $0 != node && !current.drained.contains($0) }
        if left.isEmpty && !force {
            throw CloudletError(
                .invalidArguments,
                "draining \(node) would leave no replica of cluster \(name) that may lead (drained: "
                    + "\(current.drained.map(\.name).sorted().joined(separator: ", "))); pass --force to drain it anyway")
        }
        _ = try await etcd.put(keys.drained + node.name, Array("drained".utf8))
    }

    /// Lets `node` lead again.
    public func undrain(_ node: NodeID) async throws {
        _ = try await checkReplica(node)
        _ = try await etcd.delete(keys.drained + node.name)
    }

    /// Makes `node` the preferred leader (nil: no preference): the leader hands over once `node` has caught up.
    public func promote(_ node: NodeID?) async throws {
        guard let node else {
            _ = try await etcd.delete(keys.preferred)
            return
        }
        _ = try await checkReplica(node)
        if try await preferences().drained.contains(node) {
            throw CloudletError(.invalidArguments, "\(node) is drained: undrain it before promoting it")
        }
        _ = try await etcd.put(keys.preferred, Array(node.name.utf8))
    }

    /// Takes `node` — a replica that is gone for good — out of the replica set of every partition: it no longer
    /// counts towards the majority that elects leaders and acknowledges writes, nor holds the compaction horizon
    /// back. Returns the replica set left. The nodes pick the change up at their next poll of etcd.
    ///
    /// Refused (`.invalidArguments`, naming why) when `node` is not a replica, is the last one, is live (registered
    /// under its lease: stop it first), or when the replicas left would not have a live majority; and
    /// (`.serviceUnavailable`, retry) while the previous change is not settled — a live node has not applied it yet,
    /// or a partition's leader has not yet heard from a majority of the new set that it holds everything the leader
    /// held (docs/replication.md, "Membership"). One replica at a time keeps every majority of the old set and every
    /// majority of the new one overlapping, so nodes may learn of the change at different moments.
    @discardableResult
    public func remove(_ node: NodeID) async throws -> [NodeID] {
        let placement = try await placement()
        let replicas = ClusterNode.replicaList(placement.value)
        guard replicas.contains(node) else {
            throw CloudletError(
                .invalidArguments,
                "\(node) is not a replica of cluster \(name): its replicas are \(replicas.map(\.name).joined(separator: ", "))")
        }
        guard replicas.count > 1 else {
            throw CloudletError(.invalidArguments, "\(node) is the last replica of cluster \(name): removing it would leave no copy of the data")
        }
        let listing = try await etcd.list(prefix: keys.root)
        func value(_ key: String) -> String? {
            listing.first { $0.key == key }.map { String(decoding: $0.value, as: UTF8.self) }
        }
        let live = liveNodes(listing)
        if live.contains(node) {
            throw CloudletError(
                .invalidArguments,
                "\(node) is live (registered at \(value(keys.node(node)) ?? "?")): remove takes out a replica that is gone for good; "
                    + "stop it first (its lease lapses within the lease TTL)")
        }
        let left = replicas.filter { $0 != node }
        let liveLeft = left.filter { live.contains($0) }
        guard liveLeft.count >= left.count / 2 + 1 else {
            throw CloudletError(
                .invalidArguments,
                "removing \(node) would leave \(liveLeft.count) live replica\(liveLeft.count == 1 ? "" : "s") of \(left.count) "
                    + "(\(left.map { "\($0.name)\(live.contains($0) ? "" : " down")" }.joined(separator: ", "))): not a majority, so the "
                    + "partitions could neither elect a leader nor acknowledge writes, and a down replica may hold acknowledged "
                    + "writes the live ones lack; bring replicas back first")
        }
        try checkSettled(placement, listing)
        try await write(left, over: placement)
        return left
    }

    /// Adds `node` — a live node outside the replica set, started with an empty store (it waits to be added) — to
    /// the replica set of every partition. Returns the new set. The node then seeds itself from the leader's files
    /// and tails; meanwhile it counts towards the majority like any replica that is behind (with 3 replicas and one
    /// added, 3 of 4 must have a write: the others alone still make it while it catches up).
    ///
    /// Refused (`.invalidArguments`, naming why) when `node` is already a replica or is not live (start it first:
    /// `cloudlet serve --cluster … --node NODE` on an empty store registers it and waits); and (`.serviceUnavailable`,
    /// retry) while the previous change of the set is not settled. One node at a time, as for ``remove(_:)``: any
    /// majority of S and any majority of S + {x} share a member (⌊n/2⌋+1 + ⌊(n+1)/2⌋+1 > n+1), so nodes may learn of
    /// the change at different moments.
    @discardableResult
    public func add(_ node: NodeID) async throws -> [NodeID] {
        let placement = try await placement()
        let replicas = ClusterNode.replicaList(placement.value)
        guard !replicas.contains(node) else {
            throw CloudletError(
                .invalidArguments,
                "\(node) is already a replica of cluster \(name): its replicas are \(replicas.map(\.name).joined(separator: ", "))")
        }
        guard !node.name.isEmpty, !node.name.contains(",") else {
            throw CloudletError(.invalidArguments, "'\(node.name)' is not a node name")
        }
        let listing = try await etcd.list(prefix: keys.root)
        guard listing.contains(where: { $0.key == keys.node(node) }) else {
            throw CloudletError(
                .invalidArguments,
                "\(node) is not live in cluster \(name): start it first (`cloudlet serve --cluster … --node \(node.name)` on an "
                    + "empty store registers it and waits to be added), then add it")
        }
        let grown = replicas + [node]
        let live = liveNodes(listing)
        let down = replicas.filter { !live.contains($0) }
        guard grown.count - down.count >= grown.count / 2 + 1 else {
            throw CloudletError(
                .invalidArguments,
                "adding \(node) would make \(grown.count) replicas of which \(down.map(\.name).joined(separator: ", ")) "
                    + "\(down.count == 1 ? "is" : "are") down: the live ones, the new node included, would not be a majority, so no "
                    + "write could be acknowledged; bring the down replicas back or remove them first")
        }
        try checkSettled(placement, listing)
        try await write(grown, over: placement)
        return grown
    }

    /// The replica set's key. - Throws: `.invalidArguments` when the cluster has not formed (yet).
    private func placement() async throws -> EtcdClient.KeyValue {
        guard let placement = try await etcd.get(keys.placement) else {
            throw CloudletError(.invalidArguments, "etcd at \(etcd.endpoint) holds no cluster named \(name) (no \(keys.placement))")
        }
        return placement
    }

    /// Replaces the replica set `placement` held with `replicas`, by compare-and-swap on its mod revision.
    /// - Throws: `.serviceUnavailable` (retry) when it changed meanwhile.
    private func write(_ replicas: [NodeID], over placement: EtcdClient.KeyValue) async throws {
        guard try await etcd.put(keys.placement, Array(replicas.map(\.name).joined(separator: ",").utf8), ifModifiedAt: placement.modRevision) != nil
        else {
            throw CloudletError(.serviceUnavailable, "the replica set of cluster \(name) changed meanwhile: retry")
        }
    }

    /// The nodes registered under their leases in `listing` (the cluster's keys).
    private func liveNodes(_ listing: [EtcdClient.KeyValue]) -> Set<NodeID> {
        Set(listing.filter { $0.key.hasPrefix(keys.nodes) }.map { NodeID(String($0.key.dropFirst(keys.nodes.count))) })
    }

    /// Throws `.serviceUnavailable` (retry) while the replica set's last change is not settled: a live replica has not
    /// applied it, or a log's leader has not yet heard from a majority of the new set that it holds everything the
    /// leader held (docs/replication.md, "Membership").
    private func checkSettled(_ placement: EtcdClient.KeyValue, _ listing: [EtcdClient.KeyValue]) throws {
        guard placement.modRevision != placement.createRevision else { return }
        func value(_ key: String) -> String? {
            listing.first { $0.key == key }.map { String(decoding: $0.value, as: UTF8.self) }
        }
        let replicas = ClusterNode.replicaList(placement.value)
        let live = liveNodes(listing)
        let version = String(placement.modRevision)
        for n in replicas where live.contains(n) && value(keys.applied + n.name) != version {
            throw CloudletError(
                .serviceUnavailable,
                "\(n) has not applied the last change of the replica set yet: retry in a moment")
        }
        let logs = Set(listing.compactMap { kv -> UInt32? in
            let prefix = keys.root + "partitions/"
            guard kv.key.hasPrefix(prefix) else { return nil }
            return kv.key.dropFirst(prefix.count).split(separator: "/").first.flatMap { UInt32($0) }
        })
        for log in logs.sorted() where value(keys.settled(log)) != version {
            throw CloudletError(
                .serviceUnavailable,
                "\(log == Catalog.logPartition ? "the catalog" : "partition \(log)") has not settled the last change of the "
                    + "replica set yet (its leader has not heard from a majority of the new set): retry in a moment")
        }
    }

    private func checkReplica(_ node: NodeID) async throws -> [NodeID] {
        let replicas = try await replicas()
        guard replicas.contains(node) else {
            throw CloudletError(
                .invalidArguments,
                "\(node) is not a replica of cluster \(name): its replicas are \(replicas.map(\.name).joined(separator: ", "))")
        }
        return replicas
    }
}
