import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Shares as `cloudkit.share` records of their zone: saved with their root in one commit, in the owner's and the
/// participants' zone change feeds, and the catalog's copy repaired from them after a crash between the two logs.
@Suite struct ShareRecordTests {
    let dir = TempDir("share-records")

    func trip(_ name: String, _ zone: ZoneID) -> Record {
        Record(recordType: "Trip", recordName: name, zoneID: zone, fields: ["title": .string(name)])
    }

    func zoneKey(_ zone: ZoneID) -> ZoneKey {
        ZoneKey(container: testContainer, environment: .development, owner: zone.ownerName, zoneName: zone.zoneName)
    }

    /// alice's zone "trips", created.
    func aliceZone(_ store: CloudletStore) async throws -> (Database, ZoneID) {
        let alice = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "trips", ownerName: "alice")
        try await alice.createZone(zone)
        return (alice, zone)
    }

    /// The key directory's entry of `name` in `zone`.
    func entry(_ store: CloudletStore, _ zone: ZoneID, _ name: String) throws -> RecordEntry? {
        let key = zoneKey(zone)
        return try store.partition(for: key).state.withLock { try $0.entry(key, name) }
    }

    @Test("a share saved by modify while its zone is deleted is refused with zoneNotFound, and nothing brings the zone back")
    func aShareSavedByModifyRacingItsZonesDeletionIsRefused() async throws {
        let store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("lisbon", zone))
        let deleted = onceBeforeCommit(store) { try await alice.deleteZone(zone) }
        let (records, shares) = try await alice.modify(
            [.create(trip("porto", zone))], saving: [ShareSave(Share(zone: zone, publicPermission: .readOnly))])
        #expect(deleted.value)
        #expect(records[0].code == .zoneNotFound, "\(records[0])")
        if case .failure(let e) = shares[0] { #expect(e.code == .zoneNotFound, "\(e)") } else { Issue.record("the share was saved") }
        await expectError(.zoneNotFound) { try await alice.zone(for: zone) }
        #expect(store.catalog.snapshot().shares.shares(in: zoneKey(zone)).isEmpty)
        try await store.close()
    }

    @Test func aShareSavedWithItsRootIsOneCommitAndAFailedShareFailsTheAtomicZone() async throws {
        let store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        let root = RecordID(recordName: "lisbon", zoneID: zone)
        let (records, shares) = try await alice.modify(
            [.create(trip("lisbon", zone))],
            saving: [ShareSave(Share(root: root, participants: [Share.Participant(userRecordName: "bob", permission: .readWrite)]))])
        let saved = try shares[0].get()
        #expect(records[0].error == nil)
        #expect(saved.shortGUID != nil && saved.rootRecordName == "lisbon")
        // One commit: the root's and the share record's entries carry the same LSN.
        let rootEntry = try #require(try entry(store, zone, "lisbon"))
        let shareEntry = try #require(try entry(store, zone, saved.id.recordName))
        #expect(rootEntry.lsn == shareEntry.lsn)
        #expect(shareEntry.recordType == Share.recordType && shareEntry.changeTag == saved.changeTag)
        #expect(try await alice.share(for: saved.id) == saved)
        // A second share of the same root fails, and with it (atomic) the record saved alongside: neither is written.
        let (again, failed) = try await alice.modify(
            [.create(trip("porto", zone))], saving: [ShareSave(Share(root: root, recordName: "second"))])
        #expect(again[0].error?.code == .batchRequestFailed)
        #expect(throws: CloudletError.self) { try failed[0].get() }
        #expect((try? failed[0].get()) == nil)
        if case .failure(let e) = failed[0] { #expect(e.code == .recordExists) }
        #expect(try entry(store, zone, "porto") == nil)
        #expect(try entry(store, zone, "second") == nil)
        // A failed record fails the share saved with it.
        let (bad, notSaved) = try await alice.modify(
            [.update(trip("nope", zone))], saving: [ShareSave(Share(root: RecordID(recordName: "nope", zoneID: zone)))])
        #expect(bad[0].error != nil)
        if case .failure(let e) = notSaved[0] { #expect(e.code == .batchRequestFailed) } else { Issue.record("the share was saved") }
        #expect(try await alice.shares(in: zone).map(\.id.recordName) == [saved.id.recordName])
        // A share cannot take the name of a record, whether it exists or is saved with it.
        _ = try await alice.save(trip("evora", zone))
        await expectError(.recordExists) { try await alice.saveShare(Share(root: RecordID(recordName: "evora", zoneID: zone), recordName: "lisbon")) }
        let (_, taken) = try await alice.modify([.create(trip("faro", zone))], saving: [ShareSave(Share(root: RecordID(recordName: "faro", zoneID: zone), recordName: "faro"))])
        if case .failure(let e) = taken[0] { #expect(e.code == .recordExists) } else { Issue.record("the share took a record's name") }
        #expect(try await alice.record(for: root).recordType == "Trip")
        #expect(try entry(store, zone, "faro") == nil)
        // A share cannot be written as a plain record.
        let plain = try await alice.modify([.create(Record(recordType: Share.recordType, recordName: "fake", zoneID: zone))])
        #expect(plain[0].error?.code == .invalidArguments)
        try await store.close()
    }

    @Test func theShareIsARecordOfTheOwnersAndTheParticipantsZoneFeedsAndItsDeletionADeletion() async throws {
        let store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("lisbon", zone))
        let share = try await alice.share(
            root: RecordID(recordName: "lisbon", zoneID: zone), participants: [Share.Participant(userRecordName: "bob", permission: .readWrite)])
        let c = try store.container(testContainer)
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!)
        let bob = try c.sharedDatabase(user: "bob")

        // The owner's feed: the root and the share record, which reads back as the share (bob accepted).
        let first = try await alice.zoneChanges(zone, maxBytes: nil)
        let shareRecords = first.changes.compactMap { change -> Record? in
            if case .changed(let r) = change, r.recordType == Share.recordType { return r }
            return nil
        }
        #expect(first.changes.map(\.recordID.recordName).sorted() == ["lisbon", share.id.recordName].sorted())
        let fromFeed = try Share(record: try #require(shareRecords.first))
        #expect(fromFeed.participant("bob")?.acceptance == .accepted)
        #expect(fromFeed == (try await alice.share(for: share.id)))
        // The participant's feed has it too.
        let bobs = try await bob.zoneChanges(zone, maxBytes: nil)
        #expect(bobs.changes.map(\.recordID.recordName).sorted() == ["lisbon", share.id.recordName].sorted())

        // A change to the share (carol invited) is a change of its record since the token, and nothing else is.
        try await alice.addParticipant("carol", permission: .readOnly, to: share.id)
        let second = try await alice.zoneChanges(zone, since: first.token, maxBytes: nil)
        #expect(second.changes.map(\.recordID.recordName) == [share.id.recordName])
        if case .changed(let r) = second.changes.first { #expect(try Share(record: r).participant("carol")?.acceptance == .pending) }
        let bobSecond = try await bob.zoneChanges(zone, since: bobs.token, maxBytes: nil)
        #expect(bobSecond.changes.map(\.recordID.recordName) == [share.id.recordName])

        // Ending the share deletes its record: a deletion in the owner's feed.
        try await alice.deleteShare(share.id)
        let third = try await alice.zoneChanges(zone, since: second.token, maxBytes: nil)
        #expect(third.changes == [.deleted(share.id, recordType: Share.recordType)])
        await expectError(.unknownItem) { try await alice.record(for: share.id) }
        try await store.close()
    }

    @Test func deletingTheRootEndsTheShareInTheSameCommit() async throws {
        let store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("lisbon", zone))
        let share = try await alice.share(root: RecordID(recordName: "lisbon", zoneID: zone))
        _ = try await alice.modify([.forceDelete(RecordID(recordName: "lisbon", zoneID: zone))])
        let rootGone = try #require(try entry(store, zone, "lisbon"))
        let shareGone = try #require(try entry(store, zone, share.id.recordName))
        #expect(rootGone.deleted && shareGone.deleted && rootGone.lsn == shareGone.lsn)
        #expect(try await alice.shares(in: zone).isEmpty)
        // Deleting the share's record through modify ends it like deleteShare: bob loses the zone.
        _ = try await alice.save(trip("porto", zone))
        let second = try await alice.share(
            root: RecordID(recordName: "porto", zoneID: zone), participants: [Share.Participant(userRecordName: "bob", permission: .readOnly)])
        let c = try store.container(testContainer)
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: second.shortGUID!)
        #expect(try await c.sharedDatabase(user: "bob").zones().map(\.id) == [zone])
        // bob's acceptance changed the share (its record): the tag read before it is stale.
        #expect(try await alice.modify([.delete(second.id, changeTag: second.changeTag!)])[0].error?.code == .serverRecordChanged)
        let current = try await alice.share(for: second.id)
        let deleted = try await alice.modify([.delete(second.id, changeTag: current.changeTag!)])
        #expect(deleted[0].error == nil)
        #expect(try await alice.shares(in: zone).isEmpty)
        #expect(try await c.sharedDatabase(user: "bob").zones().isEmpty)
        try await store.close()
    }

    @Test func aCrashThatLostTheCatalogsCopyIsRepairedFromTheShareRecordAtOpen() async throws {
        var store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("porto", zone))
        let old = try await alice.share(
            root: RecordID(recordName: "porto", zoneID: zone), participants: [Share.Participant(userRecordName: "bob", permission: .readOnly)])
        let c = try store.container(testContainer)
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: old.shortGUID!)
        // From here the catalog's copies are lost, as when a crash came after the partition's fsync and before the
        // catalog's: a share saved with its root, and bob's leaving.
        store.testHooks.setDropShareCatalogCopies(true)
        let root = RecordID(recordName: "lisbon", zoneID: zone)
        let (_, saved) = try await alice.modify([.create(trip("lisbon", zone))], saving: [ShareSave(Share(root: root))])
        let share = try saved[0].get()
        try await c.sharedDatabase(user: "bob").deleteShare(old.id)
        #expect(store.catalog.snapshot().shares.shares(in: zoneKey(zone))[share.id.recordName] == nil)
        #expect(store.catalog.snapshot().shares.shares(in: zoneKey(zone))[old.id.recordName]?.participant("bob")?.acceptance == .accepted)
        try await store.close()

        store = try await openStore(dir)
        let alice2 = try store.container(testContainer).privateDatabase(user: "alice")
        // Root and share both there, and the catalog agrees with the records.
        #expect(try await alice2.record(for: root).recordName == "lisbon")
        let repaired = try await alice2.share(for: share.id)
        #expect(repaired == share)
        let left = try await alice2.share(for: old.id)
        #expect(left.participant("bob")?.acceptance == .removed)
        #expect(try Share(record: try await alice2.record(for: old.id)) == left)
        // bob's access went with his leaving: his shared database no longer shows the zone, and its feed says so.
        let bob = try store.container(testContainer).sharedDatabase(user: "bob")
        #expect(try await bob.zones().isEmpty)
        #expect(store.catalog.snapshot().shares.recorded[zoneKey(zone)]?[share.id.recordName] != nil)
        try await store.close()
        // Nothing more to repair on the next open.
        store = try await openStore(dir)
        let fixed = try store.reconcileShareRecords()
        #expect(fixed.repaired == 0 && fixed.migrated == 0)
        try await store.close()
    }

    @Test func aCrashThatLostThePartitionCommitTakesTheShareOutOfTheCatalogAtOpen() async throws {
        var store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("porto", zone))
        let kept = try await alice.share(root: RecordID(recordName: "porto", zoneID: zone))
        let key = zoneKey(zone)
        // The catalog has what a lost partition commit would have written: a new share of a root saved with it (the
        // root, in the same lost commit, is absent), a later version of a share, and bob's access through them.
        var lost = Share(root: RecordID(recordName: "lisbon", zoneID: zone), participants: [
            Share.Participant(userRecordName: "bob", permission: .readWrite, acceptance: .accepted)
        ])
        lost.owner = "alice"
        lost.changeTag = "zz"
        var later = kept
        later.publicPermission = .readOnly
        later.changeTag = "zy"
        let lastLSN = store.partition(for: key).state.withLock { $0.lastLSN }
        let (_, version) = try await store.catalog.commit(waitingForRoom: { _ in
            ([
                .security(.share(.recorded(key, lost, lsn: lastLSN + 1))), .security(.share(.recorded(key, later, lsn: lastLSN + 1))),
                .security(.share(.access(key, user: "bob", lsn: lastLSN + 1, gone: false))),
            ], ())
        })
        try await store.catalog.waitDurable(version)
        #expect(try await store.container(testContainer).sharedDatabase(user: "bob").zones().map(\.id) == [zone])
        try await store.close()

        store = try await openStore(dir)
        let alice2 = try store.container(testContainer).privateDatabase(user: "alice")
        // Root and share both absent; the other share back as its record has it.
        await expectError(.unknownItem) { try await alice2.record(for: RecordID(recordName: "lisbon", zoneID: zone)) }
        await expectError(.unknownItem) { try await alice2.share(for: lost.id) }
        #expect(try await alice2.share(for: kept.id) == kept)
        #expect(try await store.container(testContainer).sharedDatabase(user: "bob").zones().isEmpty)
        try await store.close()
    }

    @Test func sharesSavedBeforeShareRecordsAreMigratedOnceAtOpen() async throws {
        var store = try await openStore(dir)
        let (alice, zone) = try await aliceZone(store)
        _ = try await alice.save(trip("lisbon", zone))
        let key = zoneKey(zone)
        // A share as an older release kept it: in the catalog only.
        var legacy = Share(root: RecordID(recordName: "lisbon", zoneID: zone), participants: [Share.Participant(userRecordName: "bob")])
        legacy.owner = "alice"
        legacy.shortGUID = "abcdefghij0123456789"
        legacy.changeTag = "legacy"
        let (_, version) = try await store.catalog.commit(waitingForRoom: { _ in ([.security(.share(.put(key, legacy)))], ()) })
        try await store.catalog.waitDurable(version)
        await expectError(.unknownItem) { try await alice.record(for: legacy.id) }
        try await store.close()

        store = try await openStore(dir)
        let alice2 = try store.container(testContainer).privateDatabase(user: "alice")
        let migrated = try await alice2.share(for: legacy.id)
        #expect(migrated.shortGUID == legacy.shortGUID && migrated.participants == legacy.participants)
        #expect(try Share(record: try await alice2.record(for: legacy.id)) == migrated)
        #expect(try await alice2.zoneChanges(zone, maxBytes: nil).changes.map(\.recordID.recordName).contains(legacy.id.recordName))
        try await store.close()
        store = try await openStore(dir)
        #expect(try await store.container(testContainer).privateDatabase(user: "alice").share(for: legacy.id) == migrated)
        let fixed = try store.reconcileShareRecords()
        #expect(fixed.repaired == 0 && fixed.migrated == 0)
        try await store.close()
    }
}
