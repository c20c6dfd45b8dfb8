import CloudletCore
import CloudletReplication
import Testing

struct ReplicaEnvelopeTests {
    static let messages: [ReplicaMessage] = [
        .fetch(epoch: 7, from: 12, previousEpoch: 5, durable: 11),
        .frames(
            epoch: 7, previousEpoch: 5,
            frames: [ReplicatedFrame(lsn: 12, epoch: 7, payload: [1, 2, 3]), ReplicatedFrame(lsn: 13, epoch: 7, payload: [])],
            leaderDurable: 13, horizon: 11),
        .frames(epoch: 9, previousEpoch: 0, frames: [], leaderDurable: 0, horizon: 0),
        .diverged(epoch: 9, from: 20, previousEpoch: 7, agreedEpoch: 5, agreedLSN: 15),
        .ahead(epoch: 9, leaderLastLSN: 30),
        .fence(epoch: 11),
        .fenced(epoch: 11, end: LogEnd(epoch: 9, lsn: 42)),
        .notLeader(epoch: 3),
        .compacted(epoch: 9, through: 1_000),
    ]

    @Test(arguments: messages) func roundTrips(_ message: ReplicaMessage) throws {
        let envelope = ReplicaEnvelope(log: 0xFFFF_FFFF, from: NodeID("n2"), message: message)
        #expect(try ReplicaEnvelope(decoding: envelope.encoded()) == envelope)
    }

    @Test func truncatedOrTrailingBytesAreRefused() throws {
        let bytes = ReplicaEnvelope(log: 0, from: NodeID("n1"), message: Self.messages[1]).encoded()
        for cut in [1, 5, bytes.count - 1] {
            #expect(throws: CloudletError.self) { try ReplicaEnvelope(decoding: Array(bytes.prefix(cut))) }
        }
        #expect(throws: CloudletError.self) { try ReplicaEnvelope(decoding: bytes + [0]) }
        var unknown = ReplicaEnvelope(log: 0, from: NodeID("n1"), message: .fence(epoch: 1)).encoded()
        unknown[0] = 9
        let error = #expect(throws: CloudletError.self) { try ReplicaEnvelope(decoding: unknown) }
        #expect(error?.message.contains("version 9") == true)
    }
}
