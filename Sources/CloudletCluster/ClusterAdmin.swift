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
        guard let placement = try await etcd.get(keys.placement) else {
            throw CloudletError(.invalidArguments, "etcd at \(etcd.endpoint) holds no cluster named \(name) (no \(keys.placement))")
        }
        return String(decoding: placement.value, as: UTF8.self).split(separator: ",").map { NodeID(String($0)) }
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
