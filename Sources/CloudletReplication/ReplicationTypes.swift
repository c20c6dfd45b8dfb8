/// A node of the cluster, by the name it registers under in the coordinator (`--node n1`).
public struct NodeID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var name: String

    public init(_ name: String) { self.name = name }

    public static func < (a: NodeID, b: NodeID) -> Bool { a.name < b.name }
    public var description: String { name }
}

/// Milliseconds on the node's monotonic clock (the shell's `ContinuousClock`, the simulation's virtual time).
public typealias Millis = UInt64

/// Where a replica's log ends: the epoch of its last frame and that frame's LSN. Ordered by epoch, then LSN — Raft's
/// "more up to date": by the log-matching property (frames of one epoch at one LSN are the same frame everywhere),
/// a log ending later in this order holds every frame a log ending earlier has that was acknowledged.
public struct LogEnd: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var epoch: UInt64
    public var lsn: UInt64

    public init(epoch: UInt64, lsn: UInt64) {
        self.epoch = epoch
        self.lsn = lsn
    }

    public static let empty = LogEnd(epoch: 0, lsn: 0)

    public static func < (a: LogEnd, b: LogEnd) -> Bool { (a.epoch, a.lsn) < (b.epoch, b.lsn) }
    public var description: String { "LSN \(lsn) of epoch \(epoch)" }
}

/// One frame as replication sees it: its LSN, the epoch that wrote it, and its bytes (opaque here: the stored frame,
/// verbatim, in the server; a write's id in the simulation).
public struct ReplicatedFrame: Hashable, Sendable {
    public var lsn: UInt64
    public var epoch: UInt64
    public var payload: [UInt8]

    public init(lsn: UInt64, epoch: UInt64, payload: [UInt8]) {
        self.lsn = lsn
        self.epoch = epoch
        self.payload = payload
    }
}

/// The partition's leader key in the coordinator: who leads, under which lease, and the epoch — the coordinator's
/// revision that created the key (etcd's `create_revision`), so every new leadership has a higher epoch.
public struct LeaderKey: Hashable, Sendable, CustomStringConvertible {
    public var node: NodeID
    public var epoch: UInt64
    public var lease: UInt64

    public init(node: NodeID, epoch: UInt64, lease: UInt64) {
        self.node = node
        self.epoch = epoch
        self.lease = lease
    }

    public var description: String { "\(node) in epoch \(epoch)" }
}

/// When the leader acknowledges a write (`--ack`).
public enum AckMode: String, Sendable {
    /// Once the leader has the frame fsynced. A failover can lose acknowledged writes the new leader never got.
    case leader
    /// Once a majority of the partition's replicas (the leader included) have the frame fsynced: a failover never
    /// loses an acknowledged write. The cluster default.
    case quorum
}

/// The epochs of a log: at which LSN each epoch's frames start (Kafka's leader-epoch cache). Epochs increase along
/// the log; an epoch that wrote no frame is absent.
public struct EpochHistory: Hashable, Sendable {
    /// (epoch, first LSN), both increasing.
    public private(set) var starts: [(epoch: UInt64, lsn: UInt64)] = []

    public init() {}

    public static func == (a: EpochHistory, b: EpochHistory) -> Bool {
        a.starts.elementsEqual(b.starts) { $0.epoch == $1.epoch && $0.lsn == $1.lsn }
    }
    public func hash(into h: inout Hasher) {
        for s in starts {
            h.combine(s.epoch)
            h.combine(s.lsn)
        }
    }

    /// Records that frame `lsn` (the next one) has `epoch`.
    public mutating func record(epoch: UInt64, at lsn: UInt64) {
        if let last = starts.last {
            precondition(epoch >= last.epoch, "epoch \(epoch) at LSN \(lsn) after epoch \(last.epoch)")
            if epoch == last.epoch { return }
        }
        starts.append((epoch, lsn))
    }

    /// The epoch of frame `lsn` (0 for LSN 0 or a log without frames).
    public func epoch(at lsn: UInt64) -> UInt64 {
        guard lsn > 0 else { return 0 }
        return starts.last(where: { $0.lsn <= lsn })?.epoch ?? 0
    }

    /// Forgets the frames after `lsn`.
    public mutating func truncate(after lsn: UInt64) {
        starts.removeAll { $0.lsn > lsn }
    }

    /// The latest epoch of this log that is not after `epoch`, and the LSN of its last frame here (a log holding
    /// frames up to `lastLSN`); (0, 0) when there is none. Kafka's `OffsetsForLeaderEpoch`: a follower whose last
    /// frame has epoch `epoch` agrees with this log at most up to that LSN.
    public func end(ofEpochAtMost epoch: UInt64, lastLSN: UInt64) -> (epoch: UInt64, lsn: UInt64) {
        guard let i = starts.lastIndex(where: { $0.epoch <= epoch }) else { return (0, 0) }
        return (starts[i].epoch, i + 1 < starts.count ? starts[i + 1].lsn - 1 : lastLSN)
    }
}
