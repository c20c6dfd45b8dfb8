import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite struct SubscriptionTests {
    let dir = TempDir("subs")
    let zone = ZoneID(zoneName: "Inbox")

    func db(_ store: CloudletStore) async throws -> Database {
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        try await db.createZone(zone)
        return db
    }

    /// Reads alice's notifications after `after`, waiting up to `timeout` seconds for the first.
    func inbox(_ store: CloudletStore, after: NotificationID?, timeout: Double = 2) async -> NotificationHub.Batch {
        await store.notifications(container: testContainer, user: "alice", after: after, wait: timeout)
    }

    @Test func subscriptionsAreSavedListedFetchedDeletedAndSurviveReopen() async throws {
        var store = try await openStore(dir)
        var db = try await db(store)
        let q = Subscription(
            id: "cheap", kind: .query(recordType: "Item", predicate: try Predicate(format: "price < 10"), zoneID: nil),
            firesOn: [.create, .update], desiredKeys: ["price"])
        try await db.saveSubscription(q)
        try await db.saveSubscription(Subscription(id: "zone", kind: .zone(zone)))
        try await db.saveSubscription(Subscription(id: "all", kind: .database))
        #expect(try await db.subscriptions().map(\.id) == ["all", "cheap", "zone"])
        try await store.close()
        store = try await openStore(dir)
        db = try store.container(testContainer).privateDatabase(user: "alice")
        #expect(try await db.subscription("cheap") == q)
        try await db.deleteSubscription("zone")
        #expect(try await db.subscriptions().map(\.id) == ["all", "cheap"])
        await expectError(.unknownItem) { try await db.deleteSubscription("zone") }
        await expectError(.unknownItem) { try await db.subscription("zone") }
        // Bob sees none of alice's.
        #expect(try await store.container(testContainer).privateDatabase(user: "bob").subscriptions().isEmpty)
        await expectError(.zoneNotFound) { try await db.saveSubscription(Subscription(id: "z", kind: .zone(ZoneID(zoneName: "Nope")))) }
        await expectError(.badDatabase) {
            try await store.container(testContainer).publicDatabase(user: "alice").saveSubscription(Subscription(id: "d", kind: .database))
        }
        await expectError(.invalidArguments) { try await db.saveSubscription(Subscription(id: "", kind: .database)) }
        try await store.close()
    }

    @Test func querySubscriptionsFireForExactlyTheMatchingCommits() async throws {
        let store = try await openStore(dir)
        let db = try await db(store)
        try await db.saveSubscription(Subscription(
            id: "cheap", kind: .query(recordType: "Item", predicate: try Predicate(format: "price < 10"), zoneID: nil),
            firesOn: .all, desiredKeys: ["price"]))
        let start = await inbox(store, after: nil, timeout: 0)
        #expect(start.notifications.isEmpty)
        var item = Record(recordType: "Item", recordName: "i1", zoneID: zone, fields: ["price": 5, "name": "pen"])
        item = try await db.save(item)                                                    // create, matches
        _ = try await db.save(Record(recordType: "Item", recordName: "i2", zoneID: zone, fields: ["price": 50]))  // no match
        _ = try await db.save(Record(recordType: "Other", recordName: "o", zoneID: zone, fields: ["price": 1]))   // other type
        var expensive = item
        expensive["price"] = 99
        expensive = try await db.save(expensive)                                          // update, no longer matches
        var cheapAgain = expensive
        cheapAgain["price"] = 3
        cheapAgain = try await db.save(cheapAgain)                                        // update, matches
        try await db.deleteRecord(cheapAgain.id)                                          // delete of a matching record
        var got: [RecordNotification] = []
        var position = start.next
        while got.count < 3 {
            let batch = await inbox(store, after: position)
            #expect(!batch.gap)
            if batch.notifications.isEmpty { break }
            got += batch.notifications
            position = batch.next
        }
        #expect(got.map(\.reason) == [.recordCreated, .recordUpdated, .recordDeleted])
        #expect(got.map(\.recordID.recordName) == ["i1", "i1", "i1"])
        #expect(got[0].fields == ["price": 5])
        #expect(got[1].fields == ["price": 3])
        #expect(got.allSatisfy { $0.subscriptionID == "cheap" })
        #expect(got.map(\.id) == got.map(\.id).sorted())
        // Nothing else arrives.
        #expect(await inbox(store, after: position, timeout: 0.2).notifications.isEmpty)
        try await store.close()
    }

    @Test func zoneAndDatabaseSubscriptionsAndFiresOnce() async throws {
        let store = try await openStore(dir)
        let db = try await db(store)
        try await db.createZone(ZoneID(zoneName: "Other"))
        try await db.saveSubscription(Subscription(id: "zone", kind: .zone(zone)))
        try await db.saveSubscription(Subscription(id: "db", kind: .database))
        try await db.saveSubscription(Subscription(
            id: "once", kind: .query(recordType: "Note", predicate: .all, zoneID: nil), firesOn: .create, firesOnce: true))
        _ = try await db.save(note("a", zone: zone))
        _ = try await db.save(note("b", zone: ZoneID(zoneName: "Other")))
        var got: [RecordNotification] = []
        var position: NotificationID? = nil
        for _ in 0..<10 where got.count < 4 {
            let b = await inbox(store, after: position)
            got += b.notifications
            position = b.next
        }
        let pairs = got.map { "\($0.subscriptionID):\($0.recordID.recordName)" }
        #expect(Set(pairs) == ["zone:a", "db:a", "once:a", "db:b"])
        #expect(pairs.count == 4)
        // The fire-once subscription is gone.
        for _ in 0..<100 where (try? await db.subscription("once")) != nil { try await Task.sleep(for: .milliseconds(10)) }
        await expectError(.unknownItem) { try await db.subscription("once") }
        // A position from another incarnation of the log is a gap, not a silent skip.
        let stale = await inbox(store, after: NotificationID(incarnation: 1, sequence: 5), timeout: 0)
        #expect(stale.gap)
        try await store.close()
    }

    /// The waiter's own timeout is an hour: only the notification can wake it within the test's time limit (no
    /// timing threshold, which a loaded machine would trip).
    @Test(.timeLimit(.minutes(1))) func aWaitingReaderIsWokenByTheNextNotification() async throws {
        let store = try await openStore(dir)
        let db = try await db(store)
        try await db.saveSubscription(Subscription(id: "zone", kind: .zone(zone)))
        let start = await inbox(store, after: nil, timeout: 0)
        let waiter = Task { await inbox(store, after: start.next, timeout: 3600) }
        try await Task.sleep(for: .milliseconds(100))
        _ = try await db.save(note("late", zone: zone))
        let batch = await waiter.value
        #expect(batch.notifications.map(\.recordID.recordName) == ["late"])
        try await store.close()
    }

    /// Many readers of one user's log (a user's websockets, one per device) wait at once: each is registered next to
    /// the others (none replaces or loses another), a cancelled one leaves, and one notification wakes every other.
    @Test(.timeLimit(.minutes(1))) func manyReadersOfOneLogAreAllWokenByOneNotification() async throws {
        let store = try await openStore(dir)
        let db = try await db(store)
        try await db.saveSubscription(Subscription(id: "zone", kind: .zone(zone)))
        let start = await inbox(store, after: nil, timeout: 0)
        let hub = store.notificationHub
        let readers = (0..<500).map { _ in Task { await inbox(store, after: start.next, timeout: 3600) } }
        while hub.waitingReaders.load(ordering: .relaxed) < readers.count { try await Task.sleep(for: .milliseconds(10)) }
        for r in readers.prefix(100) { r.cancel() }
        for r in readers.prefix(100) { #expect(await r.value.notifications.isEmpty) }
        #expect(hub.waitingReaders.load(ordering: .relaxed) == 400)
        _ = try await db.save(note("late", zone: zone))
        for r in readers.dropFirst(100) { #expect(await r.value.notifications.map(\.recordID.recordName) == ["late"]) }
        #expect(hub.waitingReaders.load(ordering: .relaxed) == 0)
        try await store.close()
    }

    /// The index: a commit is matched against the subscriptions that can fire on it (its database, zone and record
    /// type), not against every subscription of the store.
    @Test func aCommitIsMatchedOnlyAgainstTheSubscriptionsThatCanFire() async throws {
        let store = try await openStore(dir)
        let container = try store.container(testContainer)
        let bob = container.publicDatabase(user: "bob")
        for i in 0..<300 {
            try await bob.saveSubscription(Subscription(
                id: "w\(i)", kind: .query(recordType: "Watched\(i % 10)", predicate: .all, zoneID: nil)))
        }
        let alice = container.publicDatabase(user: "alice")
        try await alice.saveSubscription(Subscription(id: "notes", kind: .query(recordType: "Note", predicate: .all, zoneID: nil)))
        let start = await inbox(store, after: nil, timeout: 0)
        let before = store.notificationHub.candidatesChecked.load(ordering: .relaxed)
        _ = try await alice.save(note("n1"))
        let batch = await inbox(store, after: start.next)
        #expect(batch.notifications.map(\.subscriptionID) == ["notes"])
        #expect(store.notificationHub.candidatesChecked.load(ordering: .relaxed) - before == 1)
        // Bob's still fire for their own type.
        _ = try await alice.save(Record(recordType: "Watched3", recordName: "w"))
        var got: [RecordNotification] = []
        var position: NotificationID? = nil
        for _ in 0..<20 where got.count < 30 {
            let b = await store.notifications(container: testContainer, user: "bob", after: position, wait: 2)
            got += b.notifications
            position = b.next
        }
        #expect(got.count == 30)
        #expect(Set(got.map(\.subscriptionID)) == Set((0..<300).filter { $0 % 10 == 3 }.map { "w\($0)" }))
        try await store.close()
    }

    func store(cap: Int) async throws -> CloudletStore {
        var config = StoreConfiguration(durability: .os)
        config.subscriptionsPerUser = cap
        return try await CloudletStore.open(at: dir.sub("store"), configuration: config)
    }

    @Test func aUserCannotPassTheSubscriptionCap() async throws {
        let store = try await store(cap: 3)
        let db = try await db(store)
        for id in ["a", "b", "c"] { try await db.saveSubscription(Subscription(id: id, kind: .zone(zone))) }
        let e = await expectError(.quotaExceeded) { try await db.saveSubscription(Subscription(id: "d", kind: .zone(zone))) }
        #expect(e?.message.contains("limit is 3") == true)
        // Replacing one at the cap is fine, and so is a deletion and a creation in one batch.
        try await db.saveSubscription(Subscription(id: "a", kind: .database))
        let swapped = try await db.modifySubscriptions([.delete("b"), .create(Subscription(id: "d", kind: .zone(zone)))])
        #expect(swapped.allSatisfy { if case .success = $0 { true } else { false } })
        #expect(try await db.subscriptions().map(\.id) == ["a", "c", "d"])
        // The cap is per user and database: bob has his own.
        let bob = try store.container(testContainer).privateDatabase(user: "bob")
        try await bob.createZone(zone)
        try await bob.saveSubscription(Subscription(id: "a", kind: .zone(zone)))
        try await store.close()
    }

    @Test func aBatchThatWouldPassTheCapSavesNothing() async throws {
        let store = try await store(cap: 3)
        let db = try await db(store)
        try await db.saveSubscription(Subscription(id: "a", kind: .zone(zone)))
        await expectError(.quotaExceeded) {
            try await db.modifySubscriptions([
                .create(Subscription(id: "b", kind: .zone(zone))), .update(Subscription(id: "a", kind: .database)),
                .create(Subscription(id: "c", kind: .zone(zone))), .create(Subscription(id: "d", kind: .zone(zone))),
            ])
        }
        // Nothing of it was applied: not the creations, not the update.
        #expect(try await db.subscriptions() == [Subscription(id: "a", kind: .zone(zone))])
        // Per-item errors stay per item: a bad one does not stop the others.
        let mixed = try await db.modifySubscriptions([
            .create(Subscription(id: "a", kind: .zone(zone))), .create(Subscription(id: "b", kind: .zone(zone))),
            .update(Subscription(id: "nope", kind: .zone(zone))),
        ])
        let codes: [CloudletError.Code?] = mixed.map { r in
            guard case .failure(let e) = r else { return nil }
            return e.code
        }
        #expect(codes == [.recordExists, nil, .unknownItem])
        #expect(try await db.subscriptions().map(\.id) == ["a", "b"])
        try await store.close()
    }
}
