import Cloudlet
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet
@testable import CloudletCluster
@testable import CloudletStorage

/// Compaction and replication: a replica's log compacts only up to its compaction horizon, its marker keeps the
/// epoch history of what it covers (so the history read at start is the same as before compaction), and a log
/// compacted without one is refused by name.
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

    @Test func aReplicaStoreCompactsOnlyUpToItsHorizonAndKeepsItsEpochHistory() async throws {
        let dir = TempDir("replica-compaction")
        var config = StoreConfiguration(durability: .os)
        config.replicated = true
        config.compaction = .manual
        config.segmentSize = 4096
        var store = try await CloudletStore.open(at: dir.path, configuration: config)
        let log = store.partitions[0].log
        // Three leaderships; epoch 4's frames are all overwritten later, so only the marker can remember them.
        for epoch in [1, 4, 6] as [UInt64] {
            try log.lead(epoch: epoch)
            try await fill(store)
        }
        let before = try PartitionDriver.epochHistory(of: log)
        #expect(before.starts.map(\.epoch) == [1, 4, 6])
        #expect(try await store.compact(includeActiveSegment: true).isEmpty, "nothing is compactable below horizon 0")
        let horizon = log.lastLSN
        try log.raiseCompactionLimit(to: horizon, persist: true)
        let reports = try await store.compact(includeActiveSegment: true)
        #expect(reports.count == 1 && reports[0].framesDropped > 0)
        let marker = try #require(log.compactionMarker)
        #expect(marker.coveredThrough <= horizon)
        #expect(try PartitionDriver.epochHistory(of: log) == before)
        try await store.close()
        // After a restart too; and the horizon was stored.
        store = try await CloudletStore.open(at: dir.path, configuration: config)
        #expect(store.partitions[0].log.compactionLimit == horizon)
        #expect(try PartitionDriver.epochHistory(of: store.partitions[0].log) == before)
        try await store.close()
    }

    @Test func aLogCompactedWithoutAnEpochHistoryIsRefusedNamingWhy() async throws {
        let dir = TempDir("compacted-history")
        var store = try await CloudletStore.open(at: dir.path, configuration: StoreConfiguration(durability: .os))
        try await fill(store)
        _ = try await store.compact(includeActiveSegment: true)
        let marker = try #require(store.partitions[0].log.compactionMarker)
        try await store.close()
        // What a release before the epoch history wrote: a format-1 marker.
        let old = CompactionMarker(generation: marker.generation, coveredThrough: marker.coveredThrough).encoded()
        try Data(old).write(to: URL(fileURLWithPath: dir.path + "/p0000/COMPACTED"))
        store = try await CloudletStore.open(at: dir.path, configuration: StoreConfiguration(durability: .os))
        let error = try #require(throws: CloudletError.self) { try PartitionDriver.epochHistory(of: store.partitions[0].log) }
        #expect(error.code == .invalidArguments)
        #expect(error.message.contains("did not record the epochs") && error.message.contains("re-seed"))
        try await store.close()
    }
}
