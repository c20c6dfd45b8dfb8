import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Identity and scope: a zone's physical key is (container, environment, owner, zone) whatever handle reaches it,
/// and every engine call is checked against the caller's access context in one place.
@Suite struct AccessContextTests {
    let dir = TempDir("access")

    @Test func anonymousCallersReadThePublicDatabaseAndNothingElse() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        _ = try await c.publicDatabase(user: "alice").save(note("p"))
        let anonymous = try c.database(.public, access: .anonymous)
        #expect(try await anonymous.record(for: RecordID(recordName: "p")).recordName == "p")
        #expect(try await anonymous.query(Query(recordType: "Note")).records.count == 1)
        let denied = await expectError(.authenticationRequired) { try await anonymous.save(note("q")) }
        #expect(denied?.message.contains("signed-in user") == true)
        await expectError(.authenticationRequired) { try await anonymous.saveSubscription(Subscription(id: "s", kind: .database)) }
        await expectError(.authenticationRequired) { try await anonymous.notifications() }
        await expectError(.authenticationRequired) { try c.database(.private, access: .anonymous) }
        await expectError(.authenticationRequired) { try c.database(.shared, access: .anonymous) }
        try await store.close()
    }

    @Test func serverKeysWriteThePublicDatabaseButOwnNoPrivateOne() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let key = try c.database(.public, access: AccessContext(.serverKey("k1")))
        let saved = try await key.save(note("from-key"))
        #expect(saved.created?.userRecordName == defaultOwnerName)
        await expectError(.authenticationRequired) { try c.database(.private, access: AccessContext(.serverKey("k1"))) }
        await expectError(.authenticationRequired) { try await key.subscriptions() }
        try await store.close()
    }

    @Test func aZoneHasOneKeyWhateverHandleReachesIt() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        try await alice.createZone(ZoneID(zoneName: "Trips"))
        _ = try await alice.save(note("t1", zone: ZoneID(zoneName: "Trips")))
        let viaPrivate = try alice.key(ZoneID(zoneName: "Trips"))
        #expect(viaPrivate == ZoneKey(container: testContainer, environment: .development, owner: "alice", zoneName: "Trips"))
        #expect(viaPrivate == ZoneKey(database: DatabaseID(container: testContainer, environment: .development, scope: .shared, owner: "alice"), zoneName: "Trips"))
        #expect(viaPrivate.ownerDatabase.scope == .private)
        // Her shared database holds zones others share with her, not her own.
        let shared = try c.sharedDatabase(user: "alice")
        #expect(try await shared.zones().isEmpty)
        await expectError(.zoneNotFound) { try await shared.record(for: RecordID(recordName: "t1", zoneID: ZoneID(zoneName: "Trips", ownerName: "alice"))) }
        await expectError(.badDatabase) { try await shared.record(for: RecordID(recordName: "t1")) }
        #expect(try await shared.query(Query(recordType: "Note"), zoneWide: true).records.isEmpty)
        // The public database's zones belong to __defaultOwner__.
        let pub = try c.database(.public, access: .user("alice"))
        #expect(try pub.key(.default).owner == defaultOwnerName)
        try await store.close()
    }

    /// Stores written before keyed zones by database scope: the bytes of an encoded key and the hash that places a
    /// zone in its partition are unchanged for every zone a release could write (public and private).
    @Test func keysEncodeAndHashAsEarlierReleasesDid() throws {
        for (owner, scopeWord, scopeByte) in [("alice", "private", UInt8(1)), (defaultOwnerName, "public", UInt8(0))] {
            for env in Environment.allCases {
                let key = ZoneKey(container: testContainer, environment: env, owner: owner, zoneName: "Z")
                #expect(key.stableHash == Fingerprint.of([testContainer, env.rawValue, scopeWord, owner, "Z"]))
                // The hash itself, as FNV-1a over the parts (each followed by 0xFF) computed outside Swift.
                let pinned = ZoneKey(container: "iCloud.com.example.app", environment: .development, owner: "_u1", zoneName: "Notes")
                #expect(pinned.stableHash == 0xdd34_3ac5_39c6_b8b4)
                var w = ByteWriter(capacity: 64)
                Commit.encode(key, into: &w)
                var old = ByteWriter(capacity: 64)
                old.string(testContainer)
                old.u8(env == .production ? 1 : 0)
                old.u8(scopeByte)
                old.string(owner)
                old.string("Z")
                #expect(w.bytes == old.bytes, "\(owner) \(env)")
                var r = ByteReader(w.bytes, what: "zone key")
                #expect(try Commit.decodeZone(&r) == key)
            }
        }
        // A scope byte that disagrees with the owner was never written: refused as corruption.
        var bad = ByteWriter(capacity: 64)
        bad.string(testContainer)
        bad.u8(0)
        bad.u8(2)
        bad.string("alice")
        bad.string("Z")
        var r = ByteReader(bad.bytes, what: "zone key")
        #expect(throws: CloudletError.self) { try Commit.decodeZone(&r) }
    }
}

/// The README's example of code written against ``CloudletDatabase``, run on the embedded engine.
@Suite struct CloudletDatabaseProtocolTests {
    func unfinishedTasks(in db: some CloudletDatabase, zone: ZoneID) async throws -> [Record] {
        var out: [Record] = []
        var cursor: QueryCursor?
        repeat {
            let page = try await db.query(
                Query(recordType: "Task", predicate: try Predicate(format: "done == 0"), sortDescriptors: [QuerySort("due")]),
                zoneID: zone, resultsLimit: 3, continuationMarker: cursor)
            out += page.records
            cursor = page.cursor
        } while cursor != nil
        return out
    }

    @Test func codeWrittenAgainstTheProtocolRunsOnTheEngine() async throws {
        let dir = TempDir("protocol")
        let store = try await openStore(dir)
        let db: any CloudletDatabase = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Work")
        _ = try await db.createZone(zone)
        let ops: [RecordOperation] = (0..<10).map { i in
            .create(Record(recordType: "Task", recordName: "t\(i)", zoneID: zone, fields: ["done": .int64(Int64(i % 2)), "due": .int64(Int64(100 - i))]))
        }
        #expect(try await db.modify(ops).allSatisfy { $0.error == nil })
        let open = try await unfinishedTasks(in: db, zone: zone)
        #expect(open.map(\.recordName) == ["t8", "t6", "t4", "t2", "t0"])
        let saved = try await db.save(Record(recordType: "Task", recordName: "t99", zoneID: zone, fields: ["done": .int64(0), "due": .int64(1)]))
        #expect(saved.changeTag != nil)
        try await db.deleteRecord(saved.id)
        await expectError(.unknownItem) { try await db.record(for: saved.id) }
        let changes = try await db.zoneChanges(zone)
        #expect(changes.changes.count == 11)
        #expect(db.scope == .private)
        try await store.close()
    }
}
