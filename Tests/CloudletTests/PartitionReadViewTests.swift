import CloudletCore
import CloudletTestSupport
import Testing

@testable import Cloudlet

/// A read view answers as of the LSN it was taken at, whatever is committed after.
@Suite struct PartitionReadViewTests {
    @Test func aReadViewIsUnchangedByLaterCommits() async throws {
        let dir = TempDir("readview")
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Z")
        try await db.createZone(zone)
        _ = try await db.save(note("a", zone: zone, count: 1))
        _ = try await db.save(note("b", zone: zone, count: 1))
        let key = try db.key(zone)
        let partition = store.partition(for: key)
        let view = partition.state.withLock { $0.readView }
        let before = try #require(try view.entry(key, "a"))

        _ = try await db.modify([.forceUpdate(note("a", zone: zone, count: 2))])
        // A flush moves the memtable the view holds into a run; the view keeps its own.
        #expect(try partition.flushIndex(force: true))
        try await db.deleteRecord(RecordID(recordName: "b", zoneID: zone))
        _ = try await db.save(note("c", zone: zone, count: 1))

        let now = partition.state.withLock { $0.readView }
        #expect(now.lastLSN > view.lastLSN)
        #expect(try view.entry(key, "a") == before && now.entry(key, "a") != before)
        #expect(try view.entry(key, "b")?.deleted == false && now.entry(key, "b")?.deleted == true)
        #expect(try view.entry(key, "c") == nil && now.entry(key, "c") != nil)
        #expect(view.zone(key)?.liveCount == 2 && view.zone(key)?.entryCount == 2)
        #expect(try view.records(in: key).all().map(\.name) == ["a", "b"])
        #expect(try view.changes(in: key, after: .zero).all().map(\.name) == ["a", "b"])
        #expect(try now.changes(in: key, after: .zero).all().map(\.name) == ["a", "b", "c"])
        // The one liveness rule, asked of either: the first version of "a" is live in the view only.
        let target = LiveTarget.record(key, "a")
        #expect(try view.isLive(target, lsn: before.lsn, index: before.index))
        #expect(try !now.isLive(target, lsn: before.lsn, index: before.index))
        #expect(try !partition.state.withLock { try $0.isLive(target, lsn: before.lsn, index: before.index) })
        try await store.close()
    }
}
