import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite struct ConcurrencyTests {
    /// Optimistic concurrency as apps use it: read, change, save with the change tag, retry on conflict. With
    /// many writers racing on one record, no increment may be lost and every conflict must carry the server's copy.
    @Test func concurrentReadModifyWriteLosesNoUpdate() async throws {
        let dir = TempDir("rmw")
        let store = try await openStore(dir, durability: .fsync)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        _ = try await db.save(Record(recordType: "Counter", recordName: "c", fields: ["n": 0]))
        let writers = 16, increments = 10
        let conflicts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<writers {
                group.addTask {
                    var conflicts = 0
                    for _ in 0..<increments {
                        var current = try await db.record(for: RecordID(recordName: "c"))
                        while true {
                            current["n"] = .int64(current["n"]!.int64Value! + 1)
                            do {
                                _ = try await db.save(current)
                                break
                            } catch let e as CloudletError where e.code == .serverRecordChanged {
                                conflicts += 1
                                current = try #require(e.serverRecord)
                            }
                        }
                    }
                    return conflicts
                }
            }
            return try await group.reduce(0, +)
        }
        let final = try await db.record(for: RecordID(recordName: "c"))
        #expect(final["n"] == .int64(Int64(writers * increments)))
        #expect(conflicts > 0, "16 racing writers should have collided at least once")
        try await store.close()
    }

    /// Concurrent writers to different zones and partitions, with readers, all consistent after reopen.
    @Test func concurrentWritersAcrossPartitionsAllLand() async throws {
        let dir = TempDir("par")
        var store = try await openStore(dir, durability: .fsync, partitions: 4)
        let c = try store.container(testContainer)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for w in 0..<8 {
                group.addTask {
                    let db = try c.privateDatabase(user: "user\(w % 3)")
                    let zone = ZoneID(zoneName: "Z\(w)")
                    try await db.createZone(zone)
                    for i in 0..<25 {
                        _ = try await db.save(note("n\(i)", zone: zone, count: Int64(i)))
                        _ = try await db.record(for: RecordID(recordName: "n\(i)", zoneID: zone))
                    }
                }
            }
            try await group.waitForAll()
        }
        try await store.close()
        store = try await openStore(dir)
        #expect(store.statistics.records == 200)
        for w in 0..<8 {
            let db = try store.container(testContainer).privateDatabase(user: "user\(w % 3)")
            let changes = try await db.zoneChanges(ZoneID(zoneName: "Z\(w)"))
            #expect(changes.changes.count == 25)
        }
        try await store.close()
    }
}
