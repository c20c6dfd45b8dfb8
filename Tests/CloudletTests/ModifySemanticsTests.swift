import CloudletWire
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// CloudKit's `records/modify` semantics, case by case.
@Suite struct ModifySemanticsTests {
    let dir = TempDir("modify")

    func db(_ store: CloudletStore, user: String = "alice") throws -> Database {
        try store.container(testContainer).privateDatabase(user: user)
    }

    @Test func createThenCreateAgainIsExistsWithServerRecord() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let saved = try await db.save(note("a", title: "first"))
        #expect(saved.changeTag != nil)
        #expect(saved.created?.userRecordName == "alice")
        let e = await expectError(.recordExists) { try await db.save(note("a", title: "second")) }
        #expect(e?.serverRecord?["title"] == "first")
        #expect(e?.code.serverErrorCode == "EXISTS")
        try await store.close()
    }

    @Test func updateNeedsCurrentTagAndMergesFields() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let v1 = try await db.save(note("a", title: "one", count: 1))
        var change = Record(recordType: "Note", recordName: "a", fields: ["title": "two"])
        change.changeTag = v1.changeTag
        let v2 = try #require(try await db.modify([.update(change)])[0].record)
        #expect(v2["title"] == "two")
        #expect(v2["count"] == .int64(1), "update keeps fields it does not name")
        #expect(v2.changeTag != v1.changeTag)
        #expect(v2.created == v1.created)
        // The old tag is now stale: CONFLICT carrying the server's record.
        let stale = try await db.modify([.update(change)])[0]
        #expect(stale.code == .serverRecordChanged)
        #expect(stale.error?.serverRecord?.changeTag == v2.changeTag)
        #expect(stale.error?.code.serverErrorCode == "CONFLICT")
        // No tag at all is a bad request naming the record.
        var untagged = change
        untagged.changeTag = nil
        let bad = try await db.modify([.update(untagged)])[0]
        #expect(bad.code == .invalidArguments)
        #expect(bad.error?.message.contains("'a'") == true)
        // Updating a missing record: NOT_FOUND.
        var missing = Record(recordType: "Note", recordName: "zzz")
        missing.changeTag = "x"
        #expect(try await db.modify([.update(missing)])[0].code == .unknownItem)
        try await store.close()
    }

    @Test func replaceDropsUnnamedFields() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let v1 = try await db.save(note("a", title: "one", count: 7))
        var r = Record(recordType: "Note", recordName: "a", fields: ["title": "only"])
        r.changeTag = v1.changeTag
        let v2 = try #require(try await db.modify([.replace(r)])[0].record)
        #expect(v2.fields == ["title": "only"])
        #expect(try await db.record(for: RecordID(recordName: "a")).fields == ["title": "only"])
        r.changeTag = v1.changeTag
        #expect(try await db.modify([.replace(r)])[0].code == .serverRecordChanged)
        try await store.close()
    }

    @Test func forceUpdateAndForceReplaceIgnoreTagsAndCreate() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let created = try #require(try await db.modify([.forceUpdate(note("f", title: "new", count: 3))])[0].record)
        #expect(created["count"] == .int64(3))
        var partial = Record(recordType: "Note", recordName: "f", fields: ["title": "changed"])
        partial.changeTag = "stale"
        let merged = try #require(try await db.modify([.forceUpdate(partial)])[0].record)
        #expect(merged["count"] == .int64(3))
        #expect(merged["title"] == "changed")
        let replaced = try #require(try await db.modify([.forceReplace(partial)])[0].record)
        #expect(replaced.fields == ["title": "changed"])
        let fresh = try #require(try await db.modify([.forceReplace(note("g"))])[0].record)
        #expect(fresh.recordName == "g")
        try await store.close()
    }

    /// A replace keeps the replaced version's creation stamp and type from its key-directory entry: it reads no
    /// record from the log (the store reopened: nothing cached). An update merges fields, so it reads one.
    @Test func replacesTakeTheCreationStampFromTheKeyDirectoryWithoutReadingTheRecord() async throws {
        var store = try await openStore(dir)
        var db = try db(store)
        let a = try await db.save(note("a", title: "one", count: 1))
        let b = try await db.save(note("b", title: "one", count: 1))
        try await store.close()
        store = try await openStore(dir)
        db = try self.db(store)
        let before = store.statistics
        var r = Record(recordType: "Note", recordName: "a", fields: ["title": "two"])
        r.changeTag = a.changeTag
        let replaced = try #require(try await db.modify([.replace(r)])[0].record)
        let forced = try #require(try await db.modify([.forceReplace(note("b", title: "three"))])[0].record)
        #expect(replaced.created == a.created && forced.created == b.created, "the creation stamps are kept")
        #expect(replaced.created != nil && replaced.modified != a.modified)
        var after = store.statistics
        #expect(after.logBytesRead == before.logBytesRead, "no version was read")
        // A replace that changes the type is refused, the type also coming from the entry.
        let retyped = try await db.modify([.forceReplace(Record(recordType: "Other", recordName: "a"))])[0]
        #expect(retyped.code == .invalidArguments && retyped.error?.message.contains("type 'Note'") == true)
        try await store.close()
        store = try await openStore(dir)
        db = try self.db(store)
        let beforeUpdate = store.statistics
        var change = Record(recordType: "Note", recordName: "a", fields: ["count": .int64(5)])
        change.changeTag = replaced.changeTag
        let updated = try #require(try await db.modify([.update(change)])[0].record)
        #expect(updated["title"] == "two" && updated.created == a.created)
        after = store.statistics
        #expect(after.logBytesRead > beforeUpdate.logBytesRead, "an update reads the version")
        try await store.close()
    }

    /// An entry written by store format 4 has no creation stamp: a replace reads the version for it, and its new
    /// entry has one.
    @Test func aReplaceOfAnEntryWithoutItsCreationStampReadsTheVersionForIt() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let a = try await db.save(note("a", title: "one"))
        let key = try db.key(.default)
        let partition = store.partition(for: key)
        try partition.state.withLock { st in
            var e = try #require(try st.entry(key, "a"))
            #expect(e.created == a.created)
            e.created = nil
            // Rewrites the entry as format 4 wrote it (the zone's record counts restart from this one entry, which
            // this test does not look at).
            try st.loadZone(key, createdLSN: 0, lastChangeLSN: e.lsn, entries: [("a", e)])
        }
        partition.entryCache.removeAll()
        #expect(try partition.state.withLock { try $0.entry(key, "a")?.created } == nil)
        let replaced = try #require(try await db.modify([.forceReplace(note("a", title: "two"))])[0].record)
        #expect(replaced.created == a.created, "the stamp came from the version")
        #expect(try partition.state.withLock { try $0.entry(key, "a")?.created } == a.created)
        try await store.close()
    }

    /// Entries a prefetch looked up serve the planner only while nothing changed an entry since (the entry cache's
    /// epoch), and never as tombstones (a purge drops those).
    @Test func prefetchedEntriesSeedThePlannerOnlyWhileTheyAreCurrent() {
        let zone = ZoneKey(container: "iCloud.t", environment: .development, owner: "u", zoneName: "_defaultZone")
        func entry(_ lsn: UInt64, deleted: Bool = false) -> RecordEntry {
            RecordEntry(
                lsn: lsn, index: 0, position: FramePosition(segment: 1, offset: 40, length: 100),
                slot: Commit.Slot(offset: 0, length: 10), recordType: "Note", deleted: deleted, time: 0, deleteSelfTargets: [])
        }
        let prefetched = Partition.Prefetched(entries: ["live": entry(3), "none": nil, "gone": entry(4, deleted: true)], epoch: 7)
        let stale = PlannedLookups(zone: zone)
        prefetched.seed(stale, currentEpoch: 8)
        #expect(stale.entries.isEmpty, "a commit since the prefetch: look everything up again")
        let current = PlannedLookups(zone: zone)
        prefetched.seed(current, currentEpoch: 7)
        #expect(current.entries["live"] == .some(entry(3)) && current.entries["none"] == .some(nil))
        #expect(current.entries["gone"] == nil, "tombstones are looked up again")
    }

    @Test func keyDirectoryEntriesRoundTripWithAndWithoutTheCreationStamp() throws {
        var e = RecordEntry(
            lsn: 9, index: 2, position: FramePosition(segment: 1, offset: 40, length: 300),
            slot: Commit.Slot(block: 10..<90, recordLength: 120), recordType: "Note", deleted: false, time: 1234,
            deleteSelfTargets: ["x"], cost: 77)
        // As a format-4 store wrote it: no stamp; a replace then reads the version for it.
        #expect(try DirectoryCodec.decodeEntry(DirectoryCodec.encode(e)) == e)
        e.created = RecordStamp(timestamp: 99, userRecordName: "_u", deviceID: "d")
        #expect(try DirectoryCodec.decodeEntry(DirectoryCodec.encode(e)) == e)
        var damaged = DirectoryCodec.encode(e)
        var unstamped = e
        unstamped.created = nil
        damaged[DirectoryCodec.encode(unstamped).count] = 7  // the stamp's tag byte
        #expect(throws: CloudletError.self) { try DirectoryCodec.decodeEntry(damaged) }
    }

    @Test func deleteNeedsTagForceDeleteDoesNot() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let a = try await db.save(note("a"))
        _ = try await db.save(note("b"))
        #expect(try await db.modify([.delete(a.id, changeTag: "nope")])[0].code == .serverRecordChanged)
        #expect(try await db.modify([.delete(a.id, changeTag: a.changeTag!)])[0].error == nil)
        await expectError(.unknownItem) { try await db.record(for: a.id) }
        #expect(try await db.modify([.forceDelete(RecordID(recordName: "b"))])[0].error == nil)
        #expect(try await db.modify([.forceDelete(RecordID(recordName: "b"))])[0].code == .unknownItem)
        // A deleted record can be created again.
        #expect(try await db.modify([.create(note("a"))])[0].error == nil)
        try await store.close()
    }

    @Test func atomicBatchInCustomZoneIsAllOrNothing() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let zone = ZoneID(zoneName: "Work")
        try await db.createZone(zone)
        _ = try await db.save(note("exists", zone: zone))
        let results = try await db.modify([
            .create(note("n1", zone: zone)), .create(note("exists", zone: zone)), .create(note("n2", zone: zone)),
        ])
        #expect(results.map(\.code) == [.batchRequestFailed, .recordExists, .batchRequestFailed])
        #expect(results[0].error?.code.serverErrorCode == "ATOMIC_ERROR")
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "n1", zoneID: zone)) }
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "n2", zoneID: zone)) }
        // Non-atomic in the same zone: the good ones land.
        let partial = try await db.modify(
            [.create(note("n1", zone: zone)), .create(note("exists", zone: zone))], atomic: false)
        #expect(partial.map(\.code) == [nil, .recordExists])
        #expect(try await db.record(for: RecordID(recordName: "n1", zoneID: zone)).recordName == "n1")
        try await store.close()
    }

    @Test func defaultZoneBatchesAreNotAtomic() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        _ = try await db.save(note("exists"))
        let results = try await db.modify([.create(note("x")), .create(note("exists")), .create(note("y"))])
        #expect(results.map(\.code) == [nil, .recordExists, nil])
        #expect(try await db.record(for: RecordID(recordName: "y")).recordName == "y")
        try await store.close()
    }

    @Test func laterOperationsSeeEarlierOnesAndDuplicatesAreRefused() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let zone = ZoneID(zoneName: "Z")
        try await db.createZone(zone)
        var child = note("child", zone: zone)
        child["parent"] = .reference(Reference(recordName: "parent", action: .validate))
        let ok = try await db.modify([.create(note("parent", zone: zone)), .create(child)])
        #expect(ok.map(\.code) == [nil, nil])
        let dup = try await db.modify([.create(note("d1", zone: zone)), .forceUpdate(note("d1", zone: zone))], atomic: false)
        #expect(dup.map(\.code) == [nil, .invalidArguments])
        try await store.close()
    }

    @Test func validateReferenceRefusesMissingTarget() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        var r = note("r")
        r["owner"] = .reference(Reference(recordName: "nobody", action: .validate))
        let e = await expectError(.referenceViolation) { try await db.save(r) }
        #expect(e?.message.contains("owner") == true)
        #expect(e?.code.serverErrorCode == "VALIDATING_REFERENCE_ERROR")
        r["owner"] = .reference(Reference(recordName: "nobody", action: .none))
        _ = try await db.save(r)
        try await store.close()
    }

    @Test func deleteSelfCascadesThroughChains() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let zone = ZoneID(zoneName: "Tree")
        try await db.createZone(zone)
        // root ← a ← b ← c (each DELETE_SELF to the previous), plus an unrelated NONE reference to root.
        _ = try await db.save(note("root", zone: zone))
        var previous = "root"
        for name in ["a", "b", "c"] {
            var r = note(name, zone: zone)
            r["up"] = .reference(Reference(recordName: previous, action: .deleteSelf))
            _ = try await db.save(r)
            previous = name
        }
        var keep = note("keep", zone: zone)
        keep["up"] = .reference(Reference(recordName: "root", action: .none))
        _ = try await db.save(keep)
        var listy = note("listy", zone: zone)
        listy["ups"] = .list(.reference, [.reference(Reference(recordName: "b", action: .deleteSelf))])
        _ = try await db.save(listy)

        try await db.deleteRecord(RecordID(recordName: "root", zoneID: zone))
        for name in ["root", "a", "b", "c", "listy"] {
            await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: name, zoneID: zone)) }
        }
        #expect(try await db.record(for: RecordID(recordName: "keep", zoneID: zone)).recordName == "keep")
        try await store.close()
    }

    @Test func cascadeFollowsReferencesChangedInTheSameBatch() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        _ = try await db.save(note("target"))
        var src = note("src")
        src["t"] = .reference(Reference(recordName: "target", action: .deleteSelf))
        let results = try await db.modify([.create(src), .forceDelete(RecordID(recordName: "target"))])
        #expect(results.map(\.code) == [nil, nil])
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "src")) }
        // Dropping the reference before deleting the target keeps the source.
        _ = try await db.save(note("target"))
        let s = try await db.save(src)
        var unlinked = Record(recordType: "Note", recordName: "src", fields: ["title": "x"])
        unlinked.changeTag = s.changeTag
        _ = try await db.modify([.replace(unlinked)])
        try await db.deleteRecord(RecordID(recordName: "target"))
        #expect(try await db.record(for: RecordID(recordName: "src")).fields == ["title": "x"])
        try await store.close()
    }

    @Test func limitsAreEnforcedBeforeAnythingIsWritten() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let tooMany = (0...200).map { RecordOperation.create(note("n\($0)")) }
        await expectError(.limitExceeded) { try await db.modify(tooMany) }
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "n0")) }
        var big = note("big")
        big["blob"] = .bytes([UInt8](repeating: 7, count: 1_000_001))
        let e = await expectError(.limitExceeded) { try await db.save(big) }
        #expect(e?.message.contains("big") == true)
        big["blob"] = .bytes([UInt8](repeating: 7, count: 900_000))
        #expect(try await db.save(big).recordName == "big")
        try await store.close()
    }

    @Test(arguments: [
        ("", "record name"), ("_reserved", "reserved"), (String(repeating: "x", count: 256), "record name"),
        ("tab\there", "record name"),
    ])
    func badRecordNamesAreRefused(name: String, mention: String) async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        let e = await expectError(.invalidArguments) { try await db.save(note(name)) }
        #expect(e?.message.contains(mention) == true)
        try await store.close()
    }

    @Test func badTypeFieldZoneAndContainerNamesAreRefused() async throws {
        let store = try await openStore(dir)
        let db = try db(store)
        await expectError(.invalidArguments) { try await db.save(Record(recordType: "9Lives", recordName: "a")) }
        await expectError(.invalidArguments) {
            try await db.save(Record(recordType: "Note", recordName: "a", fields: ["bad-field": "x"]))
        }
        await expectError(.invalidArguments) { try await db.createZone(ZoneID(zoneName: "_mine")) }
        await expectError(.invalidArguments) { try await db.createZone(ZoneID(zoneName: "has space")) }
        for bad in ["com.example.noprefix", "iCloud.", "icloud.com.x", "iCloud..com", "iCloud.com.", "iCloud.com..x",
            "iCloud.has space", "iCloud.caf\u{E9}", "iCloud." + String(repeating: "a", count: 249)]
        {
            await expectError(.badContainer) { try store.container(bad) }
        }
        for good in ["iCloud.a", "iCloud.com.example-app_2.Tests", "iCloud." + String(repeating: "a", count: 248)] {
            #expect((try? store.container(good)) != nil, "\(good)")
        }
        await expectError(.invalidArguments) {
            try await db.save(Record(recordType: "Note", recordName: "l", fields: ["l": .list(.string, [.int64(1)])]))
        }
        try await store.close()
    }
}
