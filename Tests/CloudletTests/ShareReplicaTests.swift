import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// A cluster replica's catalog follows the share records (docs/sharing.md, "Storage"): a leader whose catalog copy of
/// share changes was lost (the crash between the two logs) is followed verbatim by a replica; promoted, the replica
/// repairs its catalog through its logs (``CloudletStore/reconcileShareRecordsAsLeader()``), and its own followers get
/// the repair. Simulated in one process: the logs' frames are carried by hand, as the cluster's drivers carry them.
@Suite struct ShareReplicaTests {
    let dir = TempDir("share-replica")

    func replica(_ name: String) async throws -> CloudletStore {
        var config = StoreConfiguration(durability: .os)
        config.partitions = 1
        config.replicated = true
        return try await CloudletStore.open(at: dir.sub(name), configuration: config)
    }

    /// Appends every frame of `from` that `to` lacks (partitions and catalog) as a follower does, under `epoch`.
    func follow(_ to: CloudletStore, from: CloudletStore, epoch: UInt64) async throws {
        try await ThreadBridge.offload {
            for (mine, theirs) in zip(to.partitions, from.partitions) {
                let batch = try theirs.log.frames(from: mine.log.lastLSN + 1, maxBytes: 1 << 30)
                guard !batch.bytes.isEmpty else { continue }
                try mine.waitFollowedDurable(try mine.appendFollowed(batch.bytes, leaderEpoch: epoch))
            }
            let (mine, theirs) = (to.catalog.log!, from.catalog.log!)
            let batch = try theirs.frames(from: mine.lastLSN + 1, maxBytes: 1 << 30)
            if !batch.bytes.isEmpty { try to.catalog.waitDurableBlocking(try to.catalog.appendFollowed(batch.bytes, leaderEpoch: epoch)) }
        }
    }

    @Test func aPromotedReplicaRepairsItsCatalogFromTheShareRecordsAndItsFollowersGetTheRepair() async throws {
        let leader = try await openStore(dir)
        let c = try leader.container(testContainer)
        let alice = try c.privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "trips", ownerName: "alice")
        try await alice.createZone(zone)
        for name in ["t1", "t2"] {
            _ = try await alice.save(Record(recordType: "Trip", recordName: name, zoneID: zone, fields: ["title": "x"]))
        }
        // One share whose catalog copy stays right, and that bob accepts…
        let ended = try await alice.share(root: RecordID(recordName: "t1", zoneID: zone), participants: [Share.Participant(userRecordName: "bob", permission: .readOnly)])
        try await c.publicDatabase(user: "bob").acceptShare(shortGUID: ended.shortGUID!)
        // …then the catalog copies are lost (the leader crashed between its two logs): alice ends that share, and saves
        // another, and only the share records have it.
        leader.testHooks.setDropShareCatalogCopies(true)
        try await alice.deleteShare(ended.id)
        let saved = try await alice.share(root: RecordID(recordName: "t2", zoneID: zone), participants: [Share.Participant(userRecordName: "carol", permission: .readOnly)])
        leader.testHooks.setDropShareCatalogCopies(false)

        let promoted = try await replica("promoted")
        try await follow(promoted, from: leader, epoch: 1)
        try await leader.close()
        let pc = try promoted.container(testContainer)
        // Followed verbatim, the replica's catalog is as stale as the leader's: bob still sees the ended share's zone,
        // carol cannot find the new one.
        #expect(try await pc.sharedDatabase(user: "bob").zones().map(\.id) == [zone])
        await expectError(.unknownItem) { try await pc.publicDatabase(user: "carol").resolveShare(shortGUID: saved.shortGUID!) }

        // Promoted (a new epoch), it repairs through its own logs.
        for p in promoted.partitions { try p.log.lead(epoch: 2) }
        try promoted.catalog.log!.lead(epoch: 2)
        #expect(try await promoted.reconcileShareRecordsAsLeader() == 2)
        #expect(try await pc.sharedDatabase(user: "bob").zones().isEmpty)
        #expect(try await pc.publicDatabase(user: "carol").acceptShare(shortGUID: saved.shortGUID!).share.id == saved.id)
        #expect(try await pc.sharedDatabase(user: "carol").zones().map(\.id) == [zone])
        // Nothing more to repair.
        #expect(try await promoted.reconcileShareRecordsAsLeader() == 0)

        // A follower of the new leader gets the repair from the catalog's log.
        let follower = try await replica("follower")
        try await follow(follower, from: promoted, epoch: 2)
        let fc = try follower.container(testContainer)
        #expect(try await fc.sharedDatabase(user: "bob").zones().isEmpty)
        #expect(try await fc.sharedDatabase(user: "carol").zones().map(\.id) == [zone])
        #expect(try await fc.privateDatabase(user: "alice").shares(in: zone).map(\.id) == [saved.id])
        try await follower.close()
        try await promoted.close()
    }
}
