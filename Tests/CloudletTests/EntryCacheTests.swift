import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Testing

@testable import Cloudlet

@Suite struct EntryCacheTests {
    let zone = ZoneKey(container: "c", environment: .development, owner: "u", zoneName: "z")

    func entry(lsn: UInt64, deleted: Bool = false) -> RecordEntry {
        RecordEntry(
            lsn: lsn, index: 0, position: FramePosition(segment: 1, offset: 0, length: 10),
            slot: Commit.Slot(offset: 0, length: 0), recordType: "T", deleted: deleted, time: 0, deleteSelfTargets: [])
    }

    @Test func theLeastRecentlyUsedGoesFirst() {
        var lru = LRUList<String, Int>(capacity: 3)
        lru.put("a", 1)
        lru.put("b", 2)
        lru.put("c", 3)
        #expect(lru.get("a") == 1)  // a is now the most recent: b is the least
        lru.put("d", 4)
        #expect(lru.get("b") == nil && lru.get("a") == 1 && lru.get("c") == 3 && lru.get("d") == 4)
        lru.remove("c")
        lru.put("e", 5)
        #expect(lru.count == 3 && lru.contains("e") && lru.contains("a") && lru.contains("d"))
    }

    @Test func aLookupFromBeforeAnInvalidationIsNotCachedNorAreTombstones() {
        let cache = EntryCache(capacity: 10)
        let epoch = cache.epoch
        cache.invalidate([.deleteRecord(zone: zone, recordName: "other", recordType: "T", time: 0)])
        cache.put(zone, "r", entry(lsn: 5), ifEpoch: epoch)
        #expect(cache.get(zone, "r") == nil, "looked up before a write: it may be what the write replaced")
        cache.put(zone, "r", entry(lsn: 6), ifEpoch: cache.epoch)
        #expect(cache.get(zone, "r") == nil, "a first lookup is only noted by the doorkeeper")
        cache.put(zone, "r", entry(lsn: 6), ifEpoch: cache.epoch)
        #expect(cache.get(zone, "r")?.lsn == 6, "a second one is kept")
        cache.put(zone, "gone", entry(lsn: 7, deleted: true))
        #expect(cache.get(zone, "gone") == nil)
        cache.invalidate([.putRecord(zone: zone, record: Record(recordType: "T", recordName: "r"), encoded: [])])
        #expect(cache.get(zone, "r") == nil)
        cache.put(zone, "r", entry(lsn: 8))
        #expect(cache.get(zone, "r")?.lsn == 8, "seen before: kept at once")
        cache.invalidate([.deleteZone(zone, time: 0)])
        #expect(cache.get(zone, "r") == nil)
    }

    static func blockingRead(_ db: Database, _ name: String) throws -> Record {
        try ThreadBridge.wait { try await db.record(for: RecordID(recordName: name)) }
    }

    /// Reads of records whose entries are in the index's runs (flushed, store reopened), with updates, deletes and a
    /// compaction between them: every read answers the current version, and reads again hit the cache.
    @Test(arguments: [false, true])
    func readsAnswerTheCurrentVersionThroughWritesAndCompaction(blocking: Bool) async throws {
        let dir = TempDir("entry-cache")
        var configuration = StoreConfiguration(durability: .os)
        configuration.compaction = .manual
        configuration.segmentSize = 16 << 10
        var store = try await CloudletStore.open(at: dir.sub("store"), configuration: configuration)
        var db = try store.container(testContainer).privateDatabase(user: "u")
        for batch in 0..<4 {
            _ = try await db.modify((0..<50).map { .forceReplace(note("n\(batch * 50 + $0)", title: "v0")) })
        }
        try await store.close()
        store = try await CloudletStore.open(at: dir.sub("store"), configuration: configuration)
        db = try store.container(testContainer).privateDatabase(user: "u")
        let read: @Sendable (String) async throws -> Record = { [db] name in
            // A thread that may block (a server worker): the lookup under the lock; else the async path.
            if blocking { return try await ThreadBridge.offload { try Self.blockingRead(db, name) } }
            return try await db.record(for: RecordID(recordName: name))
        }
        for i in 0..<200 { #expect(try await read("n\(i)")["title"] == .string("v0")) }
        let afterFirst = store.statistics
        for i in 0..<200 { _ = try await read("n\(i)") }
        #expect(store.statistics.entryCacheHits - afterFirst.entryCacheHits == 0, "read once before: not cached yet")
        let afterSecond = store.statistics
        for i in 0..<200 { _ = try await read("n\(i)") }
        #expect(store.statistics.entryCacheHits - afterSecond.entryCacheHits == 200, "read twice: every entry cached")

        _ = try await db.modify((0..<100).map { .forceReplace(note("n\($0)", title: "v1")) })
        try await db.deleteRecord(RecordID(recordName: "n150"))
        for i in 0..<200 where i != 150 {
            #expect(try await read("n\(i)")["title"] == .string(i < 100 ? "v1" : "v0"), "n\(i)")
        }
        #expect((try? await read("n150")) == nil, "a deleted record is not served from the cache")

        try await store.compact(includeActiveSegment: true)
        for i in 0..<200 where i != 150 {
            #expect(try await read("n\(i)")["title"] == .string(i < 100 ? "v1" : "v0"), "after compaction: n\(i)")
        }
        try await store.close()
    }
}
