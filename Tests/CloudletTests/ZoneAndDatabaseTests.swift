import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite struct ZoneAndDatabaseTests {
    let dir = TempDir("zones")

    @Test func zonesCreateListFetchDeleteAndDeleteTheirRecords() async throws {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        #expect(try await db.zones().map(\.id.zoneName) == ["_defaultZone"])
        let work = ZoneID(zoneName: "Work")
        let created = try await db.createZone(work)
        #expect(created.capabilities.contains(.atomic))
        #expect(created.id.ownerName == "alice")
        try await db.createZone(work)  // idempotent
        try await db.createZone(ZoneID(zoneName: "Home"))
        #expect(try await db.zones().map(\.id.zoneName) == ["_defaultZone", "Home", "Work"])
        #expect(try await db.zone(for: work).id.zoneName == "Work")
        for i in 0..<5 { _ = try await db.save(note("n\(i)", zone: work)) }
        try await db.deleteZone(work)
        await expectError(.zoneNotFound) { try await db.zone(for: work) }
        await expectError(.zoneNotFound) { try await db.record(for: RecordID(recordName: "n0", zoneID: work)) }
        await expectError(.zoneNotFound) { try await db.save(note("x", zone: work)) }
        await expectError(.zoneNotFound) { try await db.deleteZone(work) }
        // Re-created, the zone is empty.
        try await db.createZone(work)
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "n0", zoneID: work)) }
        await expectError(.invalidArguments) { try await db.deleteZone(.default) }
        try await store.close()
    }

    @Test("a save racing the deletion of its zone is refused with zoneNotFound when the zone was deleted before it commits, and the zone stays gone")
    func aSaveRacingItsZonesDeletionIsRefused() async throws {
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let work = ZoneID(zoneName: "Work")
        try await db.createZone(work)
        _ = try await db.save(note("kept", zone: work))
        let deleted = onceBeforeCommit(store) { try await db.deleteZone(work) }
        let results = try await db.modify([.create(note("late", zone: work)), .create(note("elsewhere"))], atomic: false)
        #expect(deleted.value)
        #expect(results[0].code == .zoneNotFound, "\(results[0])")
        #expect(results[1].error == nil, "the default zone's save is not the deleted zone's: \(results[1])")
        await expectError(.zoneNotFound) { try await db.zone(for: work) }
        #expect(try await db.zones().map(\.id.zoneName) == ["_defaultZone"])
        try await store.close()
        // Nor does the record come back with the log's replay.
        let reopened = try await openStore(dir)
        let again = try reopened.container(testContainer).privateDatabase(user: "alice")
        #expect(try await again.zones().map(\.id.zoneName) == ["_defaultZone"])
        await expectError(.zoneNotFound) { try await again.record(for: RecordID(recordName: "late", zoneID: work)) }
        try await reopened.close()
    }

    @Test func publicAndSharedDatabasesHaveNoCustomZones() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        await expectError(.badDatabase) { try await c.publicDatabase().createZone(ZoneID(zoneName: "Z")) }
        let shared = try c.sharedDatabase(user: "alice")
        await expectError(.badDatabase) { try await shared.createZone(ZoneID(zoneName: "Z")) }
        #expect(try await shared.zones().isEmpty)
        await expectError(.badDatabase) { try await shared.save(note("a")) }
        let pub = c.publicDatabase(user: "alice")
        let r = try await pub.save(note("p"))
        #expect(r.id.zoneID.ownerName == defaultOwnerName)
        #expect(r.created?.userRecordName == "alice")
        try await store.close()
    }

    @Test func usersPrivateDatabasesAreIsolated() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        let bob = try c.privateDatabase(user: "bob")
        _ = try await alice.save(note("secret"))
        try await alice.createZone(ZoneID(zoneName: "Diary"))
        await expectError(.unknownItem) { try await bob.record(for: RecordID(recordName: "secret")) }
        #expect(try await bob.zones().map(\.id.zoneName) == ["_defaultZone"])
        // Naming alice as the zone owner from bob's database does not reach alice's zone.
        let foreign = ZoneID(zoneName: "Diary", ownerName: "alice")
        await expectError(.zoneNotFound) { try await bob.record(for: RecordID(recordName: "secret", zoneID: foreign)) }
        await expectError(.zoneNotFound) { try await bob.save(note("x", zone: foreign)) }
        // Environments are separate too.
        let aliceProd = try c.privateDatabase(user: "alice", environment: .production)
        await expectError(.unknownItem) { try await aliceProd.record(for: RecordID(recordName: "secret")) }
        try await store.close()
    }

    @Test func justInTimeSchemaLocksFieldTypesAndNamesTheField() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let db = try c.privateDatabase(user: "alice")
        _ = try await db.save(note("a", count: 1))
        let types = c.schema(environment: .development)
        #expect(types.map(\.name) == ["Note"])
        #expect(types[0].fields == ["title": FieldType(.string), "count": FieldType(.int64)])
        var wrong = note("b")
        wrong["count"] = .string("three")
        let e = await expectError(.invalidArguments) { try await db.save(wrong) }
        #expect(e?.message.contains("'count'") == true)
        #expect(e?.message.contains("INT64") == true)
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "b")) }
        // A new field is added just in time.
        var more = note("c")
        more["tags"] = .list(.string, ["x"])
        _ = try await db.save(more)
        #expect(c.schema(environment: .development)[0].fields["tags"] == FieldType(.string, list: true))
        try await store.close()
    }

    @Test func productionRefusesUnknownTypesUntilDeployedAndResetRestoresProduction() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let prod = try c.privateDatabase(user: "alice", environment: .production)
        let e = await expectError(.invalidArguments) { try await prod.save(note("a")) }
        #expect(e?.message.contains("'Note'") == true)
        let dev = try c.privateDatabase(user: "alice")
        _ = try await dev.save(note("a"))
        #expect(try await c.deploySchema() == 3)  // type + 2 fields
        #expect(try await c.deploySchema() == 0)
        _ = try await prod.save(note("a"))
        var extra = note("b")
        extra["newField"] = "x"
        let e2 = await expectError(.invalidArguments) { try await prod.save(extra) }
        #expect(e2?.message.contains("newField") == true)
        _ = try await dev.save(extra)
        #expect(c.schema(environment: .development)[0].fields["newField"] != nil)
        try await c.resetDevelopmentSchema()
        #expect(c.schema(environment: .development) == c.schema(environment: .production))
        #expect(c.schema(environment: .development)[0].fields["newField"] == nil)
        try await store.close()
    }

    @Test func dataSchemaAndZonesSurviveReopenWithAndWithoutCheckpoint() async throws {
        for checkpoint in [true, false] {
            let d = TempDir("reopen")
            do {
                let store = try await openStore(d, durability: .fsync, partitions: 3)
                let c = try store.container(testContainer)
                for user in ["alice", "bob"] {
                    let db = try c.privateDatabase(user: user)
                    try await db.createZone(ZoneID(zoneName: "Z"))
                    for i in 0..<20 { _ = try await db.save(note("n\(i)", zone: ZoneID(zoneName: "Z"), count: Int64(i))) }
                    try await db.deleteRecord(RecordID(recordName: "n3", zoneID: ZoneID(zoneName: "Z")))
                }
                if checkpoint {
                    try await store.close()
                } else {
                    // Simulate a crash: leave the store open (its lock goes with a copy of the directory).
                    try store.partitions.forEach { try $0.log.flush() }
                    try FileManager.default.copyItem(atPath: d.sub("store"), toPath: d.sub("copy"))
                    try? FileManager.default.removeItem(atPath: d.sub("copy") + "/LOCK")
                    try await store.close()
                    try FileManager.default.removeItem(atPath: d.sub("store"))
                    try FileManager.default.moveItem(atPath: d.sub("copy"), toPath: d.sub("store"))
                    for p in 0..<3 {
                        let pdir = d.sub("store") + "/" + StoreMetadata.partitionDirectoryName(p)
                        for f in try FileManager.default.contentsOfDirectory(atPath: pdir) where f.hasSuffix(".ckpt") {
                            try FileManager.default.removeItem(atPath: pdir + "/" + f)
                        }
                    }
                }
            }
            let store = try await openStore(d, partitions: 1)
            #expect(store.metadata.partitions == 3, "partition count is fixed at creation")
            let c = try store.container(testContainer)
            for user in ["alice", "bob"] {
                let db = try c.privateDatabase(user: user)
                #expect(try await db.zones().map(\.id.zoneName) == ["_defaultZone", "Z"])
                let r = try await db.record(for: RecordID(recordName: "n7", zoneID: ZoneID(zoneName: "Z")))
                #expect(r["count"] == .int64(7))
                await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "n3", zoneID: ZoneID(zoneName: "Z"))) }
            }
            #expect(c.schema(environment: .development).map(\.name) == ["Note"])
            #expect(store.statistics.records == 38)
            if checkpoint { #expect(store.statistics.framesReplayed == 0, "a clean close leaves nothing to replay") }
            else { #expect(store.statistics.framesReplayed > 0) }
            try await store.close()
        }
    }

    @Test func aSecondOpenOfTheSameDirectoryIsRefused() async throws {
        let store = try await openStore(dir)
        let e = await expectError(.locked) { try await openStore(dir) }
        #expect(e?.message.contains("locked") == true)
        try await store.close()
        let again = try await openStore(dir)
        try await again.close()
    }
}
