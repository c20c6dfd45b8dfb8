import CloudletCore

/// A ``ReplicaMessage`` between two nodes, as the server carries it (`POST /cloudlet/cluster/message`, body
/// `application/octet-stream`): which log it is about, who sent it, and the message. Binary, little-endian:
///
/// ```
/// u8 version (2) · u32 log (a partition's number, or 0xFFFFFFFF for the catalog) · string from · u8 kind · fields
/// ```
///
/// Frames travel verbatim: each ``ReplicatedFrame/payload`` is the stored frame (header, LZ4 and CRC32C unchanged),
/// checked again by the receiving log before anything is appended. Version 2 added the compaction horizon to
/// `frames` and the `compacted` message; a node refuses another version by name (every node of a cluster runs the
/// same release).
public struct ReplicaEnvelope: Hashable, Sendable {
    public var log: UInt32
    public var from: NodeID
    public var message: ReplicaMessage

    public init(log: UInt32, from: NodeID, message: ReplicaMessage) {
        self.log = log
        self.from = from
        self.message = message
    }

    static let version: UInt8 = 2

    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.u8(Self.version)
        w.u32(log)
        w.string(from.name)
        switch message {
        case .fetch(let epoch, let start, let previousEpoch, let durable):
            w.u8(1)
            for v in [epoch, start, previousEpoch, durable] { w.u64(v) }
        case .frames(let epoch, let previousEpoch, let frames, let leaderDurable, let horizon):
            w.u8(2)
            for v in [epoch, previousEpoch, leaderDurable, horizon] { w.u64(v) }
            w.varint(frames.count)
            for f in frames {
                w.u64(f.lsn)
                w.u64(f.epoch)
                w.bytes(f.payload)
            }
        case .diverged(let epoch, let start, let previousEpoch, let agreedEpoch, let agreedLSN):
            w.u8(3)
            for v in [epoch, start, previousEpoch, agreedEpoch, agreedLSN] { w.u64(v) }
        case .ahead(let epoch, let leaderLastLSN):
            w.u8(4)
            for v in [epoch, leaderLastLSN] { w.u64(v) }
        case .fence(let epoch):
            w.u8(5)
            w.u64(epoch)
        case .fenced(let epoch, let end):
            w.u8(6)
            for v in [epoch, end.epoch, end.lsn] { w.u64(v) }
        case .notLeader(let epoch):
            w.u8(7)
            w.u64(epoch)
        case .compacted(let epoch, let through):
            w.u8(8)
            for v in [epoch, through] { w.u64(v) }
        }
        return w.bytes
    }

    /// Decodes an envelope; throws `.invalidArguments` naming what is wrong (a truncated or unknown message).
    public init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, what: "replication message")
        let version = try r.u8()
        guard version == Self.version else {
            throw CloudletError.invalid("replication message of version \(version); this node speaks \(Self.version)")
        }
        log = try r.u32()
        from = NodeID(try r.string())
        let kind = try r.u8()
        func u64s(_ n: Int) throws -> [UInt64] { try (0..<n).map { _ in try r.u64() } }
        switch kind {
        case 1:
            let v = try u64s(4)
            message = .fetch(epoch: v[0], from: v[1], previousEpoch: v[2], durable: v[3])
        case 2:
            let v = try u64s(4)
            let count = try r.length()
            var frames: [ReplicatedFrame] = []
            for _ in 0..<count {
                let lsn = try r.u64()
                let epoch = try r.u64()
                frames.append(ReplicatedFrame(lsn: lsn, epoch: epoch, payload: try r.bytes()))
            }
            message = .frames(epoch: v[0], previousEpoch: v[1], frames: frames, leaderDurable: v[2], horizon: v[3])
        case 3:
            let v = try u64s(5)
            message = .diverged(epoch: v[0], from: v[1], previousEpoch: v[2], agreedEpoch: v[3], agreedLSN: v[4])
        case 4:
            let v = try u64s(2)
            message = .ahead(epoch: v[0], leaderLastLSN: v[1])
        case 5: message = .fence(epoch: try r.u64())
        case 6:
            let v = try u64s(3)
            message = .fenced(epoch: v[0], end: LogEnd(epoch: v[1], lsn: v[2]))
        case 7: message = .notLeader(epoch: try r.u64())
        case 8:
            let v = try u64s(2)
            message = .compacted(epoch: v[0], through: v[1])
        default: throw CloudletError.invalid("replication message of unknown kind \(kind)")
        }
        guard r.isAtEnd else { throw CloudletError.invalid("replication message with trailing bytes") }
    }
}
