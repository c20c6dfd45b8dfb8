import Cloudlet
import CloudletCore
import CloudletTestSupport
import Testing

@testable import Cloudlet
@testable import CloudletCluster

/// Compaction and replication: a replica's log is never compacted (the protocol needs every frame's epoch from
/// LSN 1), and a log compacted anyway is refused by name instead of failing later.
struct CompactedLogReplicationTests {
    private func fill(_ store: CloudletStore) async throws {
        let db = try store.container("iCloud.com.example.app").privateDatabase(user: "_u1")
        for round in 0..<3 {
            let ops = (0..<50).map { i in
                RecordOperation.forceReplace(Record(recordType: "Item", recordName: "r\(i)", fields: ["v": .int64(Int64(round))]))
            }
            _ = try await db.modify(ops, atomic: false)
        }
    }

    @Test func aReplicaStoreIsNeverCompacted() async throws {
        let dir = TempDir("replica-compaction")
        var config = StoreConfiguration(durability: .os)
        config.replicated = true
        config.compaction.minDeadBytes = 1
        config.compaction.minDeadRatio = 0
        config.segmentSize = 4096  // sealed segments full of dead versions: background compaction would start at once
        let store = try await CloudletStore.open(at: dir.path, configuration: config)
        try await fill(store)
        try await fill(store)
        try await Task.sleep(for: .milliseconds(500))
        let partition = store.partitions[0]
        partition.compaction.waitIdle()
        #expect(partition.compaction.state.withLock { $0.compactions } == 0, "a replica compacted in the background")
        await #expect(throws: CloudletError.self) { try await store.compact(includeActiveSegment: true) }
        // Every frame is still readable from LSN 1: what a follower tails and what the epoch history is read from.
        let log = store.partitions[0].log
        let history = try PartitionDriver.epochHistory(of: log)
        #expect(history.epoch(at: log.lastLSN) == log.highestEpoch)
        #expect(try log.frames(from: 1, maxBytes: 1 << 20).firstLSN == 1)
        try await store.close()
    }

    @Test func aCompactedLogIsRefusedForReplicationNamingWhy() async throws {
        let dir = TempDir("compacted-history")
        let store = try await CloudletStore.open(at: dir.path, configuration: StoreConfiguration(durability: .os))
        try await fill(store)
        _ = try await store.compact(includeActiveSegment: true)
        let error = try #require(throws: CloudletError.self) { try PartitionDriver.epochHistory(of: store.partitions[0].log) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("was compacted, and a compacted log cannot be replicated"))
        try await store.close()
    }
}
