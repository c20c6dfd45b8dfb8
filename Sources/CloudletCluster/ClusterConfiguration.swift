import CloudletReplication

/// How a node joins a cluster (`cloudlet serve --cluster … --node … --advertise … --replicas …`). Every default is
/// the production setting.
public struct ClusterConfiguration: Sendable {
    /// etcd's client URL, `etcd://host:port` (its v3 JSON gateway).
    public var etcd: String
    /// This node's name, unique in the cluster (`--node n1`).
    public var node: NodeID
    /// The URL other nodes and forwarded clients reach this node at (`--advertise http://127.0.0.1:8081`).
    public var advertise: String
    /// Replicas of every partition (`--replicas 3`); the first nodes to register make up the replica set. Default 3.
    public var replicas: Int = 3
    /// When writes are acknowledged (`--ack quorum|leader`). Default quorum.
    public var ackMode: AckMode = .quorum
    /// The key prefix of this cluster in etcd (`--cluster-name`, default `cloudlet`): several clusters can share an
    /// etcd.
    public var name: String = "cloudlet"
    /// The etcd lease TTL of a replica, ms; a dead leader is replaced after about this long. Default 5 000.
    public var leaseTTL: Millis = 5_000
    /// How much slower than etcd's the node's clock may run over one TTL: a leader stops acknowledging
    /// `leaseTTL - clockSkewMargin` after its last successful keep-alive was sent. Default 1 000 ms.
    public var clockSkewMargin: Millis = 1_000
    /// How often the node reads the coordinator's keys (leader key, published progress, members). Default 100 ms.
    public var pollInterval: Millis = 100
    /// How often the state machine's clock ticks (retries, lease checks). Default 50 ms.
    public var tickInterval: Millis = 50

    public init(etcd: String, node: NodeID, advertise: String) {
        self.etcd = etcd
        self.node = node
        self.advertise = advertise
    }

    /// The etcd keys of this cluster.
    public struct Keys: Sendable {
        public init(name: String) { self.init(name) }
        let root: String
        init(_ name: String) { root = "/\(name)/" }
        /// A node's advertised URL, under its node lease.
        func node(_ n: NodeID) -> String { root + "nodes/" + n.name }
        var nodes: String { root + "nodes/" }
        /// The replica set, fixed once enough nodes registered (no lease).
        var placement: String { root + "placement" }
        /// `drained/<node>`: the node should not lead while another replica can (no lease: it outlives restarts).
        var drained: String { root + "drained/" }
        /// The node that should lead whenever it can (no lease).
        var preferred: String { root + "preferred" }
        /// A partition's keys: `leader` (under the leader's lease) and `progress/<node>`.
        func partition(_ p: UInt32) -> String { root + "partitions/\(p)/" }
        func leader(_ p: UInt32) -> String { partition(p) + "leader" }
        func progress(_ p: UInt32, _ n: NodeID) -> String { partition(p) + "progress/" + n.name }
        /// The version (mod revision) of the replica set the log's leader last reported settled (no lease).
        func settled(_ p: UInt32) -> String { partition(p) + "settled" }
        /// `applied/<node>`: the version of the replica set the node runs with (under its node lease).
        var applied: String { root + "applied/" }
    }
}
