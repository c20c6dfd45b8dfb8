import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Compaction keeps what is not records: schema (with index flags), index definitions and subscriptions, and the
/// indexes still answer queries after a reopen of the compacted store.
@Suite struct CompactionKeepsMetadataTests {
    @Test func schemaIndexesAndSubscriptionsSurviveCompactionAndReopen() async throws {
        let dir = TempDir("compactmeta")
        var config = StoreConfiguration(durability: .os)
        config.segmentSize = 4 << 10
        var store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        var db = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Z")
        try await db.createZone(zone)
        try await db.saveSubscription(Subscription(id: "zone", kind: .zone(zone)))
        try await db.saveSubscription(Subscription(id: "gone", kind: .database))
        try await db.deleteSubscription("gone")
        for pass in 0..<6 {
            _ = try await db.modify((0..<20).map { i in
                .forceReplace(Record(recordType: "Item", recordName: "i\(i)", zoneID: zone, fields: ["n": .int64(Int64(i * 10 + pass))]))
            })
        }
        let query = try Query(recordType: "Item", format: "n >= 50")
        let before = try await db.query(query, zoneID: zone).records.map(\.recordName).sorted()
        #expect(!before.isEmpty)
        try await store.compact(includeActiveSegment: true)
        try await store.close()
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: config)
        db = try store.container(testContainer).privateDatabase(user: "alice")
        #expect(try await db.subscriptions().map(\.id) == ["zone"])
        #expect(try store.container(testContainer).schema(environment: .development).map(\.name) == ["Item"])
        #expect(try await db.query(query, zoneID: zone).records.map(\.recordName).sorted() == before)
        try await store.close()
    }
}
