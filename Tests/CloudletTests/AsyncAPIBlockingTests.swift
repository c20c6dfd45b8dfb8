import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// The rule of docs/concurrency.md: no public async API blocks a thread of the cooperative pool — no disk read or
/// write, fdatasync, wait for durability, for room in a log or for a partition's writer there. Checked with the
/// debug build's ``BlockingCheck``, which records every place the engine is about to block on a thread that must
/// not (these tests run on the pool).
@Suite("Public async APIs never block a thread of the cooperative pool")
struct AsyncAPIBlockingTests {
    @Test("the check records a blocking call made on the pool")
    func checkRecordsABlockingCall() async throws {
        #if DEBUG
        let dir = TempDir("blocking-check")
        let store = try await openStore(dir, durability: .fsync)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.save(note("a"))
        let check = BlockingCheck()
        let partition = store.partitions[0]
        BlockingCheck.$current.withValue(check) {
            // What the async API must never do: a blocking commit and a blocking wait, right on the pool.
            _ = try? partition.commit { _, _ in ([Mutation](), ()) }
            try? partition.log.waitDurableBlocking(partition.log.lastLSN)
        }
        #expect(check.violations.contains { $0.contains("blocking write to partition 0") }, "\(check.violations)")
        #expect(check.violations.contains { $0.contains("to be durable") }, "\(check.violations)")
        try await store.close()
        #endif
    }

    @Test("every public async API of a database, a container and a store, on a reopened store read from disk")
    func publicAsyncAPIsDoNotBlockThePool() async throws {
        #if DEBUG
        let dir = TempDir("async-apis")
        var config = StoreConfiguration(durability: .fsync)
        config.recordCacheSize = 0
        let path = dir.sub("store")
        let zone = ZoneID(zoneName: "Z")
        let names = (0..<40).map { "n\($0)" }
        do {
            let store = try await CloudletStore.open(at: path, configuration: config)
            let db = try store.container(testContainer).privateDatabase(user: "u")
            try await db.createZone(zone)
            _ = try await db.modify(names.map { .create(note($0, zone: zone, title: "t \($0)", count: 1)) })
            try await store.close()
        }
        // Reopened: the key directory is in its runs on disk, no record is cached.
        let store = try await CloudletStore.open(at: path, configuration: config)
        let check = BlockingCheck()
        try await BlockingCheck.$current.withValue(check) {
            let container = try store.container(testContainer)
            let db = try container.privateDatabase(user: "u")
            _ = try await db.zones()
            _ = try await db.zone(for: zone)
            _ = try await db.createZone(ZoneID(zoneName: "Other"))
            let one = try await db.record(for: RecordID(recordName: "n1", zoneID: zone))
            _ = try await db.records(for: names.prefix(10).map { RecordID(recordName: $0, zoneID: zone) })
            var changed = one
            changed["count"] = .int64(2)
            _ = try await db.modify([.update(changed), .forceUpdate(note("n2", zone: zone, count: 3)), .forceDelete(RecordID(recordName: "n3", zoneID: zone))])
            _ = try await db.save(note("fresh", zone: zone))
            _ = try await db.query(Query(recordType: "Note", sortDescriptors: [QuerySort("count")]), zoneID: zone)
            _ = try await db.count(Query(recordType: "Note"), zoneID: zone)
            _ = try await db.explain(Query(recordType: "Note"), zoneID: zone)
            let changes = try await db.zoneChanges(zone, since: nil)
            _ = try await db.zoneChanges(zone, since: changes.token)
            _ = try await db.databaseChanges(since: nil)
            _ = try await db.saveSubscription(Subscription(id: "s", kind: .zone(zone)))
            _ = try await db.subscriptions()
            _ = try await db.subscription("s")
            _ = try await db.modify([.forceUpdate(note("n4", zone: zone, count: 9))])
            _ = try await db.notifications(after: nil, limit: 10, wait: 0)
            try await db.deleteSubscription("s")
            try await container.addIndexes(.queryable, recordType: "Note", field: "title")
            _ = try await container.importSchema("DEFINE SCHEMA\n    RECORD TYPE Extra (\n        name STRING QUERYABLE\n    );\n")
            await store.waitForIndexBuilds()
            _ = try await container.deploySchema()
            try await container.resetDevelopmentSchema()
            try await db.deleteZone(ZoneID(zoneName: "Other"))
            try await store.checkpoint()
            try await store.finishIndexMerges()
            _ = try await store.purgeTombstones(olderThan: 0)
            try await store.close()
        }
        #expect(check.violations.isEmpty, "blocked on the pool: \(check.violations)")
        #endif
    }
}
