import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Paging of database change feeds (``DatabaseChangePage``): a private database's, and a shared database's — whose
/// zones come from other users' partitions and whose access changes come from the catalog.
@Suite struct DatabaseChangePageTests {
    let dir = TempDir("change-page")

    @Test func aPageNeverEndsInsideARunOfOnePosition() {
        let zones = (0..<5).map { ZoneID(zoneName: "z\($0)", ownerName: "alice") }
        var page = DatabaseChangePage(limit: 2)
        // Positions 1, 2, 2, 2, 3: the run at 2 is taken whole, past the limit; the page resumes after 2.
        let next = page.take(
            [(1, zones[0], false), (2, zones[1], false), (2, zones[2], true), (2, zones[3], false), (3, zones[4], false)], since: 0, end: 9)
        #expect(next == 2)
        #expect(page.moreComing)
        #expect(page.changed == [zones[0], zones[1], zones[3]] && page.deleted == [zones[2]])
        // Once full, later streams are left for the next page.
        #expect(page.take([(5, zones[4], false)], since: 4, end: 9) == 4)
        var all = DatabaseChangePage(limit: 10)
        #expect(all.take([(1, zones[0], false), (4, zones[0], false)], since: 0, end: 9) == 9)
        #expect(all.changed == [zones[0]] && !all.moreComing)
    }

    /// alice shares `count` zones whole with bob, who accepts each.
    func sharedZones(_ store: CloudletStore, count: Int) async throws -> (alice: Database, bob: Database, zones: [ZoneID], shares: [Share]) {
        let c = try store.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        var zones: [ZoneID] = []
        var shares: [Share] = []
        for i in 0..<count {
            let zone = ZoneID(zoneName: "z\(i)", ownerName: "alice")
            try await alice.createZone(zone)
            _ = try await alice.save(Record(recordType: "Trip", recordName: "t", zoneID: zone))
            let share = try await alice.saveShare(Share(zone: zone, participants: [Share.Participant(userRecordName: "bob")]))
            try await c.publicDatabase(user: "bob").acceptShare(shortGUID: share.shortGUID!)
            zones.append(zone)
            shares.append(share)
        }
        return (alice, try c.sharedDatabase(user: "bob"), zones, shares)
    }

    /// Every page from `token` until `moreComing` is false: (changed, deleted, pages, last token).
    func drain(_ db: Database, since token: ChangeToken?, limit: Int) async throws -> ([ZoneID], [ZoneID], Int, ChangeToken) {
        var changed: [ZoneID] = []
        var deleted: [ZoneID] = []
        var token = token
        var pages = 0
        while true {
            let page = try await db.databaseChanges(since: token, resultsLimit: limit)
            #expect(page.changedZones.count + page.deletedZones.count <= limit, "page \(pages) passed the limit")
            changed += page.changedZones
            deleted += page.deletedZones
            token = page.token
            pages += 1
            if !page.moreComing { return (changed, deleted, pages, token!) }
            #expect(pages < 50, "paging does not end")
            if pages >= 50 { return (changed, deleted, pages, token!) }
        }
    }

    @Test func theSharedDatabasesFeedIsPagedByResultsLimitAndResumesExactly() async throws {
        let store = try await openStore(dir, partitions: 4)
        let (alice, bob, zones, shares) = try await sharedZones(store, count: 7)
        let (first, gone, pages, token) = try await drain(bob, since: nil, limit: 2)
        #expect(Set(first) == Set(zones) && first.count == zones.count, "each zone once: \(first)")
        #expect(gone.isEmpty && pages >= 4)
        // Nothing since: one empty page.
        let quiet = try await bob.databaseChanges(since: token, resultsLimit: 2)
        #expect(quiet.changedZones.isEmpty && quiet.deletedZones.isEmpty && !quiet.moreComing)
        // alice writes in z3 and z5, ends z4's share, and bob leaves z6: a page of 1 at a time reports each.
        for i in [3, 5] { _ = try await alice.save(Record(recordType: "Trip", recordName: "u", zoneID: zones[i])) }
        try await alice.deleteShare(shares[4].id)
        try await bob.deleteShare(shares[6].id)
        let (changed, deleted, _, _) = try await drain(bob, since: token, limit: 1)
        #expect(Set(changed) == [zones[3], zones[5]], "\(changed)")
        #expect(Set(deleted) == [zones[4], zones[6]], "\(deleted)")
    }

    @Test func aSharedDatabaseTokenIsCheckedLikeAPrivateOnes() async throws {
        let store = try await openStore(dir)
        let (alice, bob, _, _) = try await sharedZones(store, count: 1)
        let privateToken = try await alice.databaseChanges().token
        await expectError(.invalidArguments) { try await bob.databaseChanges(since: privateToken) }
        await expectError(.invalidArguments) { try await bob.databaseChanges(resultsLimit: 0) }
    }
}
