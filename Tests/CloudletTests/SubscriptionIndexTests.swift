import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

@Suite struct SubscriptionIndexTests {
    let alice = SubscriberID(database: DatabaseID(container: testContainer, environment: .development, scope: .private, owner: "alice"), user: "alice")
    let publicDB = DatabaseID(container: testContainer, environment: .development, scope: .public, owner: "_defaultOwner")

    func query(_ id: String, _ type: String, zone: String? = nil) -> Subscription {
        Subscription(id: id, kind: .query(recordType: type, predicate: .all, zoneID: zone.map { ZoneID(zoneName: $0) }))
    }

    @Test func anEventFindsOnlyTheSubscriptionsOfItsDatabaseZoneAndType() {
        var index = SubscriptionIndex()
        index.save(alice, Subscription(id: "db", kind: .database))
        index.save(alice, Subscription(id: "zone-a", kind: .zone(ZoneID(zoneName: "A"))))
        index.save(alice, Subscription(id: "zone-b", kind: .zone(ZoneID(zoneName: "B"))))
        index.save(alice, query("notes", "Note"))
        index.save(alice, query("notes-in-a", "Note", zone: "A"))
        index.save(alice, query("tasks", "Task"))
        let bob = SubscriberID(database: publicDB, user: "bob")
        for i in 0..<500 { index.save(bob, query("p\(i)", "Note")) }
        #expect(index.count == 506)
        let ids = index.candidates(in: alice.database, zoneName: "A", recordType: "Note").map(\.1.id)
        #expect(ids == ["db", "notes", "notes-in-a", "zone-a"])
        #expect(index.candidates(in: alice.database, zoneName: "C", recordType: "Other").map(\.1.id) == ["db"])
        #expect(index.candidates(in: publicDB, zoneName: "_defaultZone", recordType: "Task").isEmpty)
        #expect(index.candidates(in: publicDB, zoneName: "_defaultZone", recordType: "Note").count == 500)
    }

    @Test func replacingMovesASubscriptionAndDeletingRemovesIt() {
        var index = SubscriptionIndex()
        index.save(alice, query("s", "Note"))
        index.save(alice, query("s", "Task"))
        #expect(index.count == 1)
        #expect(index.candidates(in: alice.database, zoneName: "Z", recordType: "Note").isEmpty)
        #expect(index.candidates(in: alice.database, zoneName: "Z", recordType: "Task").map(\.1.id) == ["s"])
        index.apply(.deleteSubscription(alice, id: "s"))
        #expect(index.count == 0)
        #expect(index.candidates(in: alice.database, zoneName: "Z", recordType: "Task").isEmpty)
        #expect(index.buckets.isEmpty)
        // Shared-database subscribers are counted per container and environment.
        let carol = SubscriberID(database: DatabaseID(container: testContainer, environment: .development, scope: .shared, owner: "carol"), user: "carol")
        index.apply(.saveSubscription(carol, Subscription(id: "d", kind: .database)))
        #expect(index.hasShared(SchemaKey(carol.database)))
        index.apply(.deleteSubscription(carol, id: "d"))
        #expect(!index.hasShared(SchemaKey(carol.database)))
    }

    @Test("candidates come in subscriber-then-ID order, each once, through random saves, moves and deletes (model check)")
    func candidatesMatchAModelThroughRandomChanges() {
        var random = SeededRandom(seed: 12)
        var index = SubscriptionIndex()
        // The model: every subscription and the bucket it is filed in.
        var model: [SubscriptionIndex.Entry: (SubscriptionIndex.Key, Subscription)] = [:]
        let users = ["ann", "bo", "cy", "Dee", "é"]
        let zones = ["A", "B"]
        let types = ["Note", "Task"]
        func pick<T>(_ xs: [T]) -> T { xs[Int(random.next() % UInt64(xs.count))] }
        for step in 0..<3000 {
            let who = SubscriberID(database: alice.database, user: pick(users))
            let id = "s\(random.next() % 40)"
            if random.next() % 4 == 0 {
                index.delete(who, id: id)
                model[SubscriptionIndex.Entry(who: who, id: id)] = nil
            } else {
                let sub: Subscription
                switch random.next() % 4 {
                case 0: sub = Subscription(id: id, kind: .database)
                case 1: sub = Subscription(id: id, kind: .zone(ZoneID(zoneName: pick(zones))))
                case 2: sub = query(id, pick(types))
                default: sub = query(id, pick(types), zone: pick(zones))
                }
                index.save(who, sub)
                model[SubscriptionIndex.Entry(who: who, id: id)] = (SubscriptionIndex.key(of: sub, in: who.database), sub)
            }
            guard step % 50 == 0 else { continue }
            #expect(index.count == model.count)
            for zone in zones + ["C"] {
                for type in types + ["Other"] {
                    var expected: [(user: String, id: String)] = []
                    for (entry, (key, _)) in model
                    where (key.zoneName == nil || key.zoneName == zone) && (key.recordType == nil || key.recordType == type) {
                        expected.append((entry.who.user, entry.id))
                    }
                    expected.sort { a, b in a.user == b.user ? a.id < b.id : a.user < b.user }
                    let got: [String] = index.candidates(in: alice.database, zoneName: zone, recordType: type).map { c in c.0.user + "/" + c.1.id }
                    let want: [String] = expected.map { e in e.user + "/" + e.id }
                    #expect(got == want, "step \(step), \(zone)/\(type)")
                }
            }
        }
    }
}
