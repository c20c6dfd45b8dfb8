import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Sharing in the engine: shares in the owner's zone, resolve and accept, and the shared database of a participant —
/// its permissions enforced by the engine itself.
@Suite struct SharingTests {
    let dir = TempDir("sharing")

    func trip(_ name: String, _ zone: ZoneID, title: String = "Lisbon") -> Record {
        Record(recordType: "Trip", recordName: name, zoneID: zone, fields: ["title": .string(title)])
    }

    /// A trip whose parent is `parent` (shared when the parent is).
    func child(_ name: String, of parent: String, _ zone: ZoneID) -> Record {
        var r = trip(name, zone, title: name)
        r.parent = RecordID(recordName: parent, zoneID: zone)
        return r
    }

    /// alice's "trips" zone with two trips, the first shared with bob (READ_WRITE) and carol (READ_ONLY).
    func sharedTrip(_ store: CloudletStore) async throws -> (alice: Database, share: Share, zone: ZoneID) {
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "trips", ownerName: "alice")
        try await alice.createZone(zone)
        _ = try await alice.save(trip("t1", zone))
        _ = try await alice.save(trip("t2", zone, title: "Porto"))
        let share = try await alice.share(
            root: RecordID(recordName: "t1", zoneID: zone),
            participants: [
                Share.Participant(userRecordName: "bob", permission: .readWrite),
                Share.Participant(userRecordName: "carol", permission: .readOnly),
            ])
        return (alice, share, zone)
    }

    /// ``sharedTrip(_:)`` accepted by bob and carol, with their shared databases.
    func acceptedTrip(_ store: CloudletStore) async throws -> (alice: Database, share: Share, zone: ZoneID, bob: Database, carol: Database) {
        let (alice, share, zone) = try await sharedTrip(store)
        let c = try store.container(testContainer)
        for user in ["bob", "carol"] { try await c.publicDatabase(user: user).acceptShare(shortGUID: share.shortGUID!) }
        return (alice, share, zone, try c.sharedDatabase(user: "bob"), try c.sharedDatabase(user: "carol"))
    }

    @Test func aHierarchyShareIsSeenOnlyByAcceptedParticipantsAndOnlyItsRoot() async throws {
        let store = try await openStore(dir)
        let (_, share, zone) = try await sharedTrip(store)
        let c = try store.container(testContainer)
        let bob = try c.sharedDatabase(user: "bob")
        let guid = try #require(share.shortGUID)
        #expect(share.participants.allSatisfy { $0.acceptance == .pending })
        // Before accepting, nothing is shared with bob.
        #expect(try await bob.zones().isEmpty)
        await expectError(.zoneNotFound) { try await bob.record(for: RecordID(recordName: "t1", zoneID: zone)) }
        // Resolve tells bob he is invited; accept makes the zone appear in his shared database.
        let meta = try await c.publicDatabase(user: "bob").resolveShare(shortGUID: guid, fetchRootRecord: true)
        #expect(meta.callerParticipant?.acceptance == .pending)
        #expect(meta.rootRecord?.recordName == "t1")
        let accepted = try await c.publicDatabase(user: "bob").acceptShare(shortGUID: guid)
        #expect(accepted.callerParticipant?.acceptance == .accepted)
        #expect(try await bob.zones().map(\.id) == [zone])
        #expect(try await bob.record(for: RecordID(recordName: "t1", zoneID: zone)).fields["title"] == .string("Lisbon"))
        // t2 is in the zone but not in the share.
        await expectError(.unknownItem) { try await bob.record(for: RecordID(recordName: "t2", zoneID: zone)) }
        let q = try await bob.query(Query(recordType: "Trip"), zoneID: zone, maxBytes: nil)
        #expect(q.records.map(\.recordName) == ["t1"])
        #expect(try await bob.count(Query(recordType: "Trip"), zoneID: zone) == 1)
        // The zone feed: the shared root and the share itself (a `cloudkit.share` record), not t2.
        let changes = try await bob.zoneChanges(zone, maxBytes: nil)
        #expect(changes.changes.map(\.recordID.recordName) == ["t1", share.id.recordName])
        // A stranger may neither resolve nor accept.
        await expectError(.permissionFailure) { try await c.publicDatabase(user: "mallory").resolveShare(shortGUID: guid) }
        await expectError(.permissionFailure) { try await c.publicDatabase(user: "mallory").acceptShare(shortGUID: guid) }
        await expectError(.unknownItem) { try await c.publicDatabase(user: "bob").acceptShare(shortGUID: "nope") }
    }

    @Test func readWriteParticipantsEditSharedRecordsReadOnlyOnesCannotAndOnlyTheOwnerDeletesTheRoot() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, carol) = try await acceptedTrip(store)
        let t1 = RecordID(recordName: "t1", zoneID: zone)
        var edited = try await bob.record(for: t1)
        edited.fields["title"] = "Lisbon, by bob"
        let saved = try await bob.save(edited)
        #expect(saved.modified?.userRecordName == "bob")
        // It is alice's record, in her zone.
        #expect(try await alice.record(for: t1).fields["title"] == .string("Lisbon, by bob"))
        var byCarol = saved
        byCarol.fields["title"] = "carol was here"
        #expect(try await carol.modify([.update(byCarol)])[0].code == .permissionFailure)
        // Records outside the share are not bob's to write, nor is the root his to delete, nor the share a record to
        // save (deleting it is leaving it).
        #expect(try await bob.modify([.create(trip("t3", zone))])[0].code == .permissionFailure)
        #expect(try await bob.modify([.forceDelete(t1)])[0].code == .permissionFailure)
        let shareAsRecord = Record(recordType: Share.recordType, recordName: share.id.recordName, zoneID: zone)
        #expect(try await bob.modify([.forceUpdate(shareAsRecord)])[0].code == .permissionFailure)
        await expectError(.permissionFailure) { try await bob.deleteZone(zone) }
        #expect(try await alice.record(for: t1).fields["title"] == .string("Lisbon, by bob"))
        // alice's change feed shows bob's edit.
        let feed = try await alice.zoneChanges(zone, maxBytes: nil)
        let t1Change = feed.changes.compactMap { if case .changed(let r) = $0, r.recordName == "t1" { r } else { nil } }
        #expect(t1Change.first?.modified?.userRecordName == "bob")
    }

    @Test func aParticipantDeletingTheShareLeavesItAndTheOwnerEndsItForEveryone() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, carol) = try await acceptedTrip(store)
        let c = try store.container(testContainer)
        let before = try await bob.databaseChanges()
        #expect(before.changedZones == [zone])
        // carol leaves: only she loses the zone; she may not come back by the same invitation.
        try await carol.deleteShare(share.id)
        #expect(try await carol.zones().isEmpty)
        #expect(try await bob.zones().count == 1)
        #expect(try await alice.share(for: share.id).participant("carol")?.acceptance == .removed)
        await expectError(.permissionFailure) { try await c.publicDatabase(user: "carol").acceptShare(shortGUID: share.shortGUID!) }
        // alice ends it: bob's feed reports the zone gone, and nothing of it is readable.
        try await alice.deleteShare(share.id)
        #expect(try await bob.zones().isEmpty)
        let after = try await bob.databaseChanges(since: before.token)
        #expect(after.deletedZones == [zone])
        await expectError(.zoneNotFound) { try await bob.record(for: RecordID(recordName: "t1", zoneID: zone)) }
        await expectError(.unknownItem) { try await c.publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!) }
        // The records stay alice's.
        #expect(try await alice.record(for: RecordID(recordName: "t1", zoneID: zone)).recordName == "t1")
    }

    @Test func aParticipantsModifyDeletingTheShareLeavesItInTheZonesCommitWithTheOtherOperations() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await acceptedTrip(store)
        let t1 = RecordID(recordName: "t1", zoneID: zone)
        var edited = try await bob.record(for: t1)
        edited.fields["title"] = "edited on the way out"
        // Atomic: a record that fails fails the leave, and a leave that fails (a stale change tag) fails the record.
        var stale = edited
        stale.changeTag = "stale"
        let first = try await bob.modify([.update(stale), .forceDelete(share.id)])
        #expect(first.map(\.code) == [.serverRecordChanged, .batchRequestFailed])
        let second = try await bob.modify([.update(edited), .delete(share.id, changeTag: "stale")])
        #expect(second.map(\.code) == [.batchRequestFailed, .serverRecordChanged])
        #expect(try await bob.zones().map(\.id) == [zone])
        #expect(try await alice.record(for: t1).fields["title"] == .string("Lisbon"))
        // Both together: one commit (the share's record and the edit share its LSN), and bob is out.
        let tag = try #require(try await bob.share(for: share.id).changeTag)
        let left = try await bob.modify([.update(edited), .delete(share.id, changeTag: tag)])
        #expect(left.map(\.code) == [nil, nil])
        guard case .deleted(let deleted) = left[1] else { Issue.record("\(left)"); return }
        #expect(deleted == share.id)
        #expect(try await bob.zones().isEmpty)
        let after = try await alice.share(for: share.id)
        #expect(after.participant("bob")?.acceptance == .removed)
        let lsn = { (tag: String?) in tag?.split(separator: "-").first }
        #expect(lsn(left[0].record?.changeTag) != nil && lsn(left[0].record?.changeTag) == lsn(after.changeTag))
        #expect(try await alice.record(for: t1).fields["title"] == .string("edited on the way out"))
    }

    @Test func operationsAfterAParticipantLeavesInTheSameBatchAreNotShared() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await acceptedTrip(store)
        let t1 = RecordID(recordName: "t1", zoneID: zone)
        var edited = try await bob.record(for: t1)
        edited.fields["title"] = "after leaving"
        let results = try await bob.modify([.forceDelete(share.id), .update(edited)], atomic: false)
        #expect(results.map(\.code) == [nil, .zoneNotFound])
        #expect(try await alice.record(for: t1).fields["title"] == .string("Lisbon"))
        #expect(try await alice.share(for: share.id).participant("bob")?.acceptance == .removed)
    }

    @Test func theZonesSharesAreQueriedAsCloudkitShareRecordsBySystemFieldsOnly() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await acceptedTrip(store)
        // Timestamps are in milliseconds: the second share is modified later than the first (accepted just before).
        try await Task.sleep(for: .milliseconds(5))
        let porto = try await alice.share(root: RecordID(recordName: "t2", zoneID: zone))
        func names(_ db: Database, _ q: Query) async throws -> [String] {
            try await db.query(q, zoneID: zone, maxBytes: nil).records.map { try Share(record: $0).id.recordName }
        }
        // The owner: every share of her zone, read back as the shares they are.
        let all = try await alice.query(Query(recordType: Share.recordType), zoneID: zone, maxBytes: nil)
        #expect(try all.records.map(Share.init(record:)) == [try await alice.share(for: share.id), porto].sorted { $0.id.recordName < $1.id.recordName })
        #expect(try await alice.count(Query(recordType: Share.recordType), zoneID: zone) == 2)
        // Filters and sorts by system fields.
        let byName = Query(recordType: Share.recordType, predicate: .comparison(Comparison("recordName", .equals, .string(porto.id.recordName))))
        #expect(try await names(alice, byName) == [porto.id.recordName])
        let newestFirst = Query(recordType: Share.recordType, sortDescriptors: [QuerySort("modifiedTimestamp", ascending: false)])
        #expect(try await names(alice, newestFirst) == [porto.id.recordName, share.id.recordName])
        let mine = Query(recordType: Share.recordType, predicate: .comparison(Comparison("createdUserRecordName", .equals, .string("alice"))))
        #expect(try await names(alice, mine).count == 2)
        // A share's members are not fields: refused, as is a search.
        for bad in [
            Query(recordType: Share.recordType, predicate: .comparison(Comparison("publicPermission", .equals, .string("NONE")))),
            Query(recordType: Share.recordType, sortDescriptors: [QuerySort("participants")]),
            Query(recordType: Share.recordType, predicate: .comparison(Comparison("recordName", .near, .string("x"), distance: 1))),
        ] {
            await expectError(.invalidArguments) { try await alice.query(bad, zoneID: zone, maxBytes: nil) }
        }
        // A participant: the shares shared with them only.
        #expect(try await names(bob, Query(recordType: Share.recordType)) == [share.id.recordName])
        #expect(try await bob.count(Query(recordType: Share.recordType), zoneID: zone) == 1)
    }

    @Test func anOwnerRemovingAParticipantKeepsThemListedAsRemovedWithoutAccessUntilInvitedAgain() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, carol) = try await acceptedTrip(store)
        let c = try store.container(testContainer)
        let guid = try #require(share.shortGUID)
        let before = try await carol.databaseChanges()
        let removed = try await alice.removeParticipant("carol", from: share.id)
        #expect(removed.participants.map(\.userRecordName) == ["bob", "carol"])
        #expect(removed.participant("carol")?.acceptance == .removed)
        #expect(try await alice.share(for: share.id).participant("carol")?.acceptance == .removed)
        // She lost access: no zone, no records, no resolving or accepting her old invitation; her feed says it is gone.
        #expect(try await carol.zones().isEmpty)
        await expectError(.zoneNotFound) { try await carol.record(for: RecordID(recordName: "t1", zoneID: zone)) }
        await expectError(.permissionFailure) { try await c.publicDatabase(user: "carol").resolveShare(shortGUID: guid) }
        await expectError(.permissionFailure) { try await c.publicDatabase(user: "carol").acceptShare(shortGUID: guid) }
        #expect(try await carol.databaseChanges(since: before.token).deletedZones == [zone])
        #expect(try await bob.zones().map(\.id) == [zone])
        // A save that leaves bob out removes him the same way; saving the list as read keeps both REMOVED.
        var current = try await alice.share(for: share.id)
        current.participants.removeAll { $0.userRecordName == "bob" }
        let saved = try await alice.saveShare(current)
        #expect(saved.participants.map { "\($0.userRecordName):\($0.acceptance.rawValue)" }.sorted() == ["bob:REMOVED", "carol:REMOVED"])
        #expect(try await alice.saveShare(saved).participants.allSatisfy { $0.acceptance == .removed })
        #expect(try await bob.zones().isEmpty)
        // Invited again, carol is PENDING and may accept.
        #expect(try await alice.addParticipant("carol", permission: .readOnly, to: share.id).participant("carol")?.acceptance == .pending)
        try await c.publicDatabase(user: "carol").acceptShare(shortGUID: guid)
        #expect(try await carol.record(for: RecordID(recordName: "t1", zoneID: zone)).recordName == "t1")
    }

    @Test func aHierarchyShareCoversTheRecordsWhoseParentChainLeadsToItsRoot() async throws {
        let store = try await openStore(dir)
        let (alice, _, zone, bob, carol) = try await acceptedTrip(store)
        // bob (READ_WRITE) adds a day under the shared trip: it lives in alice's zone; alice adds a stop under it.
        let day = try await bob.save(child("day1", of: "t1", zone))
        #expect(day.parent?.recordName == "t1")
        #expect(try await alice.record(for: day.id).created?.userRecordName == "bob")
        _ = try await alice.save(child("stop1", of: "day1", zone))
        _ = try await alice.save(child("t2-note", of: "t2", zone))
        // Both are shared with bob and carol; t2's child is not.
        for db in [bob, carol] {
            let names = try await db.query(Query(recordType: "Trip"), zoneID: zone, maxBytes: nil).records.map(\.recordName).sorted()
            #expect(names == ["day1", "stop1", "t1"])
            #expect(try await db.record(for: RecordID(recordName: "stop1", zoneID: zone)).parent?.recordName == "day1")
            await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "t2-note", zoneID: zone)) }
            let changed = try await db.zoneChanges(zone, maxBytes: nil).changes.map(\.recordID.recordName).sorted()
            #expect(changed == ["day1", "share-t1", "stop1", "t1"])
        }
        // carol (READ_ONLY) may not add children; nobody may hang records under what is not shared, or move a shared
        // record out, or pull an unshared one in.
        #expect(try await carol.modify([.create(child("day2", of: "t1", zone))])[0].code == .permissionFailure)
        #expect(try await bob.modify([.create(child("x", of: "t2", zone))])[0].code == .permissionFailure)
        var moved = try await bob.record(for: day.id)
        moved.parent = RecordID(recordName: "t2", zoneID: zone)
        #expect(try await bob.modify([.update(moved)])[0].code == .permissionFailure)
        #expect(try await bob.modify([.forceUpdate(child("t2", of: "t1", zone))])[0].code == .permissionFailure)
        #expect(try await alice.record(for: RecordID(recordName: "t2", zoneID: zone)).parent == nil)
        // An update that names no parent keeps the record's; a replacement without one would unshare it: refused.
        var renamed = try await bob.record(for: RecordID(recordName: "stop1", zoneID: zone))
        renamed.parent = nil
        renamed.fields["title"] = "Belém"
        #expect(try await bob.modify([.replace(renamed)])[0].code == .permissionFailure)
        #expect(try await bob.modify([.update(renamed)])[0].record?.parent?.recordName == "day1")
        // bob deletes the child he may write; not the root.
        #expect(try await bob.modify([.forceDelete(RecordID(recordName: "stop1", zoneID: zone))])[0].error == nil)
        #expect(try await bob.modify([.forceDelete(RecordID(recordName: "t1", zoneID: zone))])[0].code == .permissionFailure)
    }

    @Test func deletionsOfRecordsSharedThroughTheirParentsReachParticipantsChangeFeeds() async throws {
        var store = try await openStore(dir)
        let (alice, _, zone, bob, _) = try await acceptedTrip(store)
        for (name, parent) in [("day1", "t1"), ("stop1", "day1"), ("day2", "t1"), ("note", "t2")] { _ = try await alice.save(child(name, of: parent, zone)) }
        // stop2 goes with day2 (a DELETE_SELF cascade): its tombstone names day2, whose own names t1.
        var stop2 = child("stop2", of: "day2", zone)
        stop2["day"] = .reference(Reference(recordName: "day2", action: .deleteSelf))
        _ = try await alice.save(stop2)
        let before = try await bob.zoneChanges(zone, maxBytes: nil).token
        try await alice.deleteRecord(RecordID(recordName: "stop1", zoneID: zone))  // the owner deletes a grandchild
        try await bob.deleteRecord(RecordID(recordName: "day1", zoneID: zone))  // a participant deletes a child
        try await alice.deleteRecord(RecordID(recordName: "day2", zoneID: zone))
        try await alice.deleteRecord(RecordID(recordName: "note", zoneID: zone))  // never shared: bob is not told
        func deletions(_ db: Database) async throws -> [String] {
            try await db.zoneChanges(zone, since: before, maxBytes: nil).changes.compactMap {
                if case .deleted(let id, _) = $0 { id.recordName } else { nil }
            }.sorted()
        }
        #expect(try await deletions(bob) == ["day1", "day2", "stop1", "stop2"])
        #expect(try await deletions(alice) == ["day1", "day2", "note", "stop1", "stop2"])
        // The tombstones keep their parents across a restart and a checkpoint.
        try await store.checkpoint()
        try await store.close()
        store = try await openStore(dir)
        let again = try store.container(testContainer).sharedDatabase(user: "bob")
        #expect(try await deletions(again) == ["day1", "day2", "stop1", "stop2"])
        try await store.close()
    }

    @Test func theOwnersChangesToSharedRecordsNotifyParticipantsSubscriptions() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone) = try await sharedTrip(store)
        let c = try store.container(testContainer)
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!)
        let bob = try c.sharedDatabase(user: "bob")
        try await bob.saveSubscription(Subscription(id: "trips", kind: .zone(zone)))
        // Not shared with mallory: she cannot subscribe to the zone.
        await expectError(.zoneNotFound) {
            try await c.sharedDatabase(user: "mallory").saveSubscription(Subscription(id: "trips", kind: .zone(zone)))
        }
        let start = await store.notifications(container: testContainer, user: "bob", after: nil, wait: 0)
        for name in ["t2", "t1"] {  // t2 is alice's alone: only t1's change reaches bob
            var r = try await alice.record(for: RecordID(recordName: name, zoneID: zone))
            r.fields["title"] = "changed"
            _ = try await alice.save(r)
        }
        var child = trip("day1", zone)  // a child of t1, and its child: shared too
        child.parent = RecordID(recordName: "t1", zoneID: zone)
        _ = try await alice.save(child)
        var grandchild = trip("stop1", zone)
        grandchild.parent = child.id
        _ = try await alice.save(grandchild)
        var got: [RecordNotification] = []
        var position = start.next
        while got.count < 3 {
            let batch = await store.notifications(container: testContainer, user: "bob", after: position, wait: 2)
            if batch.notifications.isEmpty { break }
            got += batch.notifications
            position = batch.next
        }
        let batch = NotificationHub.Batch(notifications: got, next: position, gap: false)
        #expect(batch.notifications.map(\.recordID.recordName) == ["t1", "day1", "stop1"])
        #expect(batch.notifications.first?.database.scope == .shared)
        #expect(batch.notifications.first?.reason == .recordUpdated)
    }

    @Test func deletingTheRootEndsTheShare() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone) = try await sharedTrip(store)
        let c = try store.container(testContainer)
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!)
        #expect(try await alice.modify([.forceDelete(RecordID(recordName: "t1", zoneID: zone))])[0].error == nil)
        await expectError(.unknownItem) { try await alice.share(for: share.id) }
        #expect(try await c.sharedDatabase(user: "bob").zones().isEmpty)
    }

    @Test func aRootDeletedByADeleteSelfCascadeEndsTheShare() async throws {
        let store = try await openStore(dir)
        let (alice, share, zone, bob, _) = try await acceptedTrip(store)
        // t1 goes when the record it references with DELETE_SELF goes.
        _ = try await alice.save(trip("plan", zone))
        var t1 = try await alice.record(for: RecordID(recordName: "t1", zoneID: zone))
        t1["plan"] = .reference(Reference(recordName: "plan", action: .deleteSelf))
        _ = try await alice.save(t1)
        #expect(try await bob.zones().count == 1)
        try await alice.deleteRecord(RecordID(recordName: "plan", zoneID: zone))
        await expectError(.unknownItem) { try await alice.record(for: t1.id) }
        await expectError(.unknownItem) { try await alice.share(for: share.id) }
        #expect(try await bob.zones().isEmpty)
    }

    @Test func aZoneWideShareWithAPublicPermissionLetsAnyUserJoinAndWriteEveryRecord() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "trips", ownerName: "alice")
        try await alice.createZone(zone)
        _ = try await alice.save(trip("t1", zone))
        let share = try await alice.saveShare(Share(zone: zone, publicPermission: .readWrite))
        #expect(share.id.recordName == Share.zoneWideShareName)
        // A hierarchy share cannot be added to a zone shared whole.
        await expectError(.recordExists) { try await alice.share(root: RecordID(recordName: "t1", zoneID: zone)) }
        let joined = try await c.publicDatabase(user: "dave").acceptShare(shortGUID: share.shortGUID!)
        #expect(joined.callerParticipant?.type == .publicUser)
        #expect(joined.callerParticipant?.permission == .readWrite)
        let dave = try c.sharedDatabase(user: "dave")
        // dave creates a record in alice's zone: she owns it.
        _ = try await dave.save(trip("t9", zone, title: "by dave"))
        #expect(try await alice.record(for: RecordID(recordName: "t9", zoneID: zone)).created?.userRecordName == "dave")
        #expect(try await dave.query(Query(recordType: "Trip"), zoneID: zone, zoneWide: true, maxBytes: nil).records.count == 2)
        // Participants cannot be edited while the share is public.
        var edited = try await alice.share(for: share.id)
        edited.participants.append(Share.Participant(userRecordName: "erin"))
        await expectError(.invalidArguments) { try await alice.saveShare(edited) }
    }

    @Test func sharesAndAcceptancesSurviveARestart() async throws {
        var store = try await openStore(dir)
        let (_, share, zone) = try await sharedTrip(store)
        try await store.container(testContainer).publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!)
        try await store.close()
        store = try await openStore(dir)
        let c = try store.container(testContainer)
        #expect(try await c.sharedDatabase(user: "bob").record(for: RecordID(recordName: "t1", zoneID: zone)).recordName == "t1")
        let again = try await c.privateDatabase(user: "alice").share(for: share.id)
        #expect(again == (try await c.publicDatabase(user: "bob").resolveShare(shortGUID: share.shortGUID!).share))
        #expect(again.participant("bob")?.acceptance == .accepted)
        // A checkpoint of the catalog keeps them too.
        try await store.checkpoint()
        try await store.close()
        store = try await openStore(dir)
        #expect(try await store.container(testContainer).sharedDatabase(user: "bob").zones().map(\.id) == [zone])
        try await store.close()
    }

    @Test func onlyTheOwnerSharesAndOnlyFromACustomZone() async throws {
        let store = try await openStore(dir)
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        _ = try await alice.save(trip("d1", .default))
        await expectError(.badDatabase) { try await alice.share(root: RecordID(recordName: "d1")) }
        let zone = ZoneID(zoneName: "trips", ownerName: "alice")
        try await alice.createZone(zone)
        await expectError(.unknownItem) { try await alice.share(root: RecordID(recordName: "missing", zoneID: zone)) }
        // bob's private database does not hold alice's zone.
        await expectError(.zoneNotFound) {
            try await c.privateDatabase(user: "bob").share(root: RecordID(recordName: "t1", zoneID: zone))
        }
        // The embedding application's own private database (whose zones are keyed like the public database's) shares nothing.
        let app = try c.privateDatabase()
        try await app.createZone(ZoneID(zoneName: "AppZone"))
        _ = try await app.save(trip("a1", ZoneID(zoneName: "AppZone")))
        await expectError(.badDatabase) { try await app.share(root: RecordID(recordName: "a1", zoneID: ZoneID(zoneName: "AppZone"))) }
        let many = (0..<Share.maxParticipants).map { Share.Participant(userRecordName: "u\($0)") }
        _ = try await alice.save(trip("t1", zone))
        await expectError(.limitExceeded) {
            try await alice.share(root: RecordID(recordName: "t1", zoneID: zone), participants: many)
        }
    }
}
