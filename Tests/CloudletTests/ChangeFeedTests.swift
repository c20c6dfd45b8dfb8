import CloudletWire
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite struct ChangeFeedTests {
    let dir = TempDir("changes")
    let zone = ZoneID(zoneName: "Sync")

    func setUp(_ store: CloudletStore, user: String = "alice") async throws -> Database {
        let db = try store.container(testContainer).privateDatabase(user: user)
        try await db.createZone(zone)
        return db
    }

    /// Follows the feed from `token` to the end, page by page.
    func drain(_ db: Database, _ zone: ZoneID, from token: ChangeToken?, limit: Int? = nil) async throws -> (
        [RecordChange], ChangeToken
    ) {
        var all: [RecordChange] = []
        var t = token
        while true {
            let page = try await db.zoneChanges(zone, since: t, resultsLimit: limit)
            all += page.changes
            t = page.token
            if !page.moreComing { return (all, page.token) }
        }
    }

    @Test func eachRecordOnceAtItsLatestVersionInCommitOrderWithTombstones() async throws {
        let store = try await openStore(dir)
        let db = try await setUp(store)
        _ = try await db.save(note("a", zone: zone, count: 1))
        _ = try await db.save(note("b", zone: zone, count: 1))
        _ = try await db.save(note("c", zone: zone, count: 1))
        _ = try await db.modify([.forceUpdate(note("a", zone: zone, count: 2))])
        try await db.deleteRecord(RecordID(recordName: "b", zoneID: zone))
        let first = try await db.zoneChanges(zone)
        #expect(!first.moreComing)
        #expect(first.changes.map(\.recordID.recordName) == ["c", "a", "b"])
        if case .changed(let a) = first.changes[1] { #expect(a["count"] == .int64(2)) } else { Issue.record("a") }
        #expect(first.changes[2] == .deleted(RecordID(recordName: "b", zoneID: ZoneID(zoneName: "Sync", ownerName: "alice")), recordType: "Note"))
        // Nothing new: empty page, same position.
        let again = try await db.zoneChanges(zone, since: first.token)
        #expect(again.changes.isEmpty)
        _ = try await db.save(note("d", zone: zone))
        let next = try await db.zoneChanges(zone, since: again.token)
        #expect(next.changes.map(\.recordID.recordName) == ["d"])
        try await store.close()
    }

    @Test func pagesResumeExactlyAndTokensSurviveReopen() async throws {
        var store = try await openStore(dir)
        var db = try await setUp(store)
        var ops: [RecordOperation] = []
        for i in 0..<57 { ops.append(.create(note("r\(i)", zone: zone, count: Int64(i)))) }
        _ = try await db.modify(ops)
        let page1 = try await db.zoneChanges(zone, resultsLimit: 20)
        #expect(page1.changes.count == 20)
        #expect(page1.moreComing)
        try await store.close()
        store = try await openStore(dir)
        db = try store.container(testContainer).privateDatabase(user: "alice")
        let (rest, _) = try await drain(db, zone, from: page1.token, limit: 20)
        #expect((page1.changes + rest).map(\.recordID.recordName) == (0..<57).map { "r\($0)" })
        try await store.close()
    }

    @Test func desiredKeysAndRecordTypesFilter() async throws {
        let store = try await openStore(dir)
        let db = try await setUp(store)
        _ = try await db.save(note("n", zone: zone))
        _ = try await db.save(Record(recordType: "Other", recordName: "o", zoneID: zone, fields: ["x": 1]))
        let page = try await db.zoneChanges(zone, desiredKeys: ["title"], desiredRecordTypes: ["Note"])
        #expect(page.changes.count == 1)
        if case .changed(let r) = page.changes.first { #expect(r.fields == ["title": "t"]) }
        try await store.close()
    }

    @Test func tokensFromElsewhereAreRefusedNotMisanswered() async throws {
        let store = try await openStore(dir)
        let db = try await setUp(store)
        _ = try await db.save(note("a", zone: zone))
        let token = try await db.zoneChanges(zone).token
        try await db.createZone(ZoneID(zoneName: "Other"))
        await expectError(.invalidArguments) { try await db.zoneChanges(ZoneID(zoneName: "Other"), since: token) }
        await expectError(.invalidArguments) { try await db.zoneChanges(zone, since: ChangeToken(bytes: [1, 2, 3, 4, 5, 6, 7])) }
        var damaged = token.bytes
        damaged[10] ^= 1
        await expectError(.invalidArguments) { try await db.zoneChanges(zone, since: ChangeToken(bytes: damaged)) }
        let dbToken = try await db.databaseChanges().token
        await expectError(.invalidArguments) { try await db.zoneChanges(zone, since: dbToken) }
        // Another store's token.
        let otherDir = TempDir("other")
        let other = try await openStore(otherDir)
        let odb = try await setUp(other)
        _ = try await odb.save(note("a", zone: zone))
        await expectError(.invalidArguments) { try await odb.zoneChanges(zone, since: token) }
        try await other.close()
        #expect(ChangeToken(base64: token.base64) == token)
        try await store.close()
    }

    @Test func expiredTokensAndRecreatedZonesSayChangeTokenExpired() async throws {
        let store = try await openStore(dir)
        let db = try await setUp(store)
        _ = try await db.save(note("a", zone: zone))
        let old = try await db.zoneChanges(zone).token
        try await db.deleteRecord(RecordID(recordName: "a", zoneID: zone))
        _ = try await db.save(note("b", zone: zone))
        // Retention 0: everything deleted so far is past the window.
        #expect(try await store.purgeTombstones(olderThan: -1) == 1)
        let e = await expectError(.changeTokenExpired) { try await db.zoneChanges(zone, since: old) }
        #expect(e?.code.serverErrorCode == "CHANGE_TOKEN_EXPIRED")
        // From scratch it works, without the forgotten tombstone.
        let fresh = try await db.zoneChanges(zone)
        #expect(fresh.changes.map(\.recordID.recordName) == ["b"])
        // A token taken after the purge keeps working.
        _ = try await db.save(note("c", zone: zone))
        #expect(try await db.zoneChanges(zone, since: fresh.token).changes.map(\.recordID.recordName) == ["c"])
        // A zone deleted and re-created: the old token expires.
        try await db.deleteZone(zone)
        try await db.createZone(zone)
        await expectError(.changeTokenExpired) { try await db.zoneChanges(zone, since: fresh.token) }
        try await store.close()
    }

    @Test func pagingFromScratchAfterAPurgeDoesNotExpireItsOwnTokens() async throws {
        let store = try await openStore(dir)
        let db = try await setUp(store)
        _ = try await db.modify((0..<30).map { .create(note("r\($0)", zone: zone)) })
        try await db.deleteRecord(RecordID(recordName: "r0", zoneID: zone))
        _ = try await db.save(note("last", zone: zone))
        #expect(try await store.purgeTombstones(olderThan: -1) == 1)
        // From scratch, page by page: every page's token must keep working although its point is older than the
        // purge horizon (the purge happened before the paging began).
        var names: [String] = []
        var token: ChangeToken?
        while true {
            let page = try await db.zoneChanges(zone, since: token, resultsLimit: 7)
            names += page.changes.map(\.recordID.recordName)
            token = page.token
            if !page.moreComing { break }
        }
        #expect(names.sorted() == ((1..<30).map { "r\($0)" } + ["last"]).sorted())
        // A purge after a token was issued, past its point, does expire it.
        let mid = try await db.zoneChanges(zone, resultsLimit: 5).token
        try await db.deleteRecord(RecordID(recordName: "r1", zoneID: zone))
        _ = try await db.save(note("later", zone: zone))
        #expect(try await store.purgeTombstones(olderThan: -1) == 1)
        await expectError(.changeTokenExpired) { try await db.zoneChanges(zone, since: mid) }
        try await store.close()
    }

    @Test func databaseChangesReportCreatedChangedAndDeletedZones() async throws {
        let store = try await openStore(dir, partitions: 3)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let start = try await db.databaseChanges()
        #expect(start.changedZones.isEmpty)
        for z in ["A", "B", "C"] { try await db.createZone(ZoneID(zoneName: z)) }
        let t1 = try await db.databaseChanges(since: start.token)
        #expect(Set(t1.changedZones.map(\.zoneName)) == ["A", "B", "C"])
        _ = try await db.save(note("x", zone: ZoneID(zoneName: "B")))
        try await db.deleteZone(ZoneID(zoneName: "C"))
        let t2 = try await db.databaseChanges(since: t1.token)
        #expect(t2.changedZones.map(\.zoneName) == ["B"])
        #expect(t2.deletedZones.map(\.zoneName) == ["C"])
        // Paging.
        for i in 0..<7 { try await db.createZone(ZoneID(zoneName: "P\(i)")) }
        var seen: [String] = []
        var t = t2.token
        while true {
            let page = try await db.databaseChanges(since: t, resultsLimit: 3)
            #expect(page.changedZones.count + page.deletedZones.count <= 3)
            seen += page.changedZones.map(\.zoneName)
            t = page.token
            if !page.moreComing { break }
        }
        #expect(seen.sorted() == (0..<7).map { "P\($0)" })
        // Bob's database is separate; the public database has no database feed.
        let bob = try store.container(testContainer).privateDatabase(user: "bob")
        await expectError(.invalidArguments) { try await bob.databaseChanges(since: t) }
        await expectError(.badDatabase) { try await store.container(testContainer).publicDatabase().databaseChanges() }
        try await store.close()
    }

    @Test func committedChangesStreamDeliversDurableCommitsInOrder() async throws {
        let store = try await openStore(dir, durability: .fsync)
        let db = try await setUp(store)
        let stream = store.committedChanges()
        let listener = Task {
            var events: [ChangeEvent] = []
            var lsns: [UInt64] = []
            for try await change in stream {
                lsns.append(change.lsn)
                events += change.events
                if events.count >= 4 { break }
            }
            return (events, lsns)
        }
        _ = try await db.save(note("a", zone: zone))
        _ = try await db.modify([.create(note("b", zone: zone)), .create(note("c", zone: zone))])
        try await db.deleteRecord(RecordID(recordName: "a", zoneID: zone))
        let (events, lsns) = try await listener.value
        #expect(lsns == lsns.sorted())
        #expect(events.count == 4)
        guard case .recordSaved(let d, let r) = events[0] else { Issue.record("first event \(events[0])"); return }
        #expect(d == db.id)
        #expect(r.recordName == "a")
        guard case .recordDeleted(_, let rid, "Note") = events[3] else { Issue.record("last event \(events[3])"); return }
        #expect(rid.recordName == "a")
        try await store.close()
    }
}
