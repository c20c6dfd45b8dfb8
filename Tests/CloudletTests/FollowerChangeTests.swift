import CloudletConcurrency
import CloudletCore
import CloudletTestSupport
import Testing

@testable import Cloudlet

/// A follower's change listeners (the notification hub, the console's change view) hear the frames it follows,
/// once they are durable there, as a leader's hear its own commits (Partition+Replication.swift).
@Suite struct FollowerChangeTests {
    @Test func aFollowersListenersHearTheFramesItFollows() async throws {
        let leaderDir = TempDir("follower-changes-leader"), followerDir = TempDir("follower-changes-follower")
        let leader = try await openStore(leaderDir)
        let follower = try await openStore(followerDir)
        let db = try leader.container(testContainer).privateDatabase(user: "u")
        _ = try await db.modify([.create(note("n1")), .create(note("n2"))])
        var changes = follower.committedChanges().makeAsyncIterator()
        let (from, to) = (leader.partitions[0], follower.partitions[0])
        try await ThreadBridge.offload {
            let batch = try from.log.frames(from: 1, maxBytes: 1 << 20)
            let last = try to.appendFollowed(batch.bytes, leaderEpoch: from.log.highestEpoch)
            try to.waitFollowedDurable(last)
        }
        // Closing ends the stream after what it was handed: nothing to wait for, whether or not the frames came.
        try await follower.close()
        var saved: [String] = []
        while let change = try await changes.next() {
            for case .recordSaved(_, let r) in change.events { saved.append(r.id.recordName) }
        }
        #expect(saved == ["n1", "n2"])
        try await leader.close()
    }

    /// A leader's store and a follower's, each in a temporary directory (kept alive by `dirs`).
    private func twoStores(_ tag: String) async throws -> (dirs: [TempDir], leader: CloudletStore, follower: CloudletStore) {
        let dirs = [TempDir(tag + "-leader"), TempDir(tag + "-follower")]
        return (dirs, try await openStore(dirs[0]), try await openStore(dirs[1]))
    }

    /// What a follower fetches before it appends (docs/replication.md, "Assets"): every asset the frames' records
    /// reference, list members too, each once; the pre-decoded frames then apply to the same records.
    @Test func decodingFollowedFramesListsTheirAssetsOnceAndTheyApplyAsDecoded() async throws {
        let (dirs, leader, follower) = try await twoStores("follower-assets")
        defer { withExtendedLifetime(dirs) {} }
        let db = try leader.container(testContainer).privateDatabase(user: "u")
        let (a, b, c) = ([UInt8](repeating: 1, count: 10), [UInt8](repeating: 2, count: 20), [UInt8](repeating: 3, count: 30))
        _ = try await db.save(Record(recordType: "Photo", recordName: "one", fields: ["image": .asset(AssetReference(data: a))]))
        _ = try await db.modify([
            .create(Record(recordType: "Album", recordName: "two", fields: ["pages": .list(.asset, [.asset(AssetReference(data: b)), .asset(AssetReference(data: c))])])),
            .create(Record(recordType: "Photo", recordName: "again", fields: ["image": .asset(AssetReference(data: a))])),
            .create(note("plain")),
        ])
        let (from, to) = (leader.partitions[0], follower.partitions[0])
        let batch = try from.log.frames(from: 1, maxBytes: 1 << 20)
        let decoded = try Partition.decodeFollowed(batch.bytes, partition: 0)
        #expect(decoded.assets.map(\.fileChecksum) == [a, b, c].map { SHA256Stream.hex(of: $0) })
        #expect(decoded.assets.map(\.size) == [10, 20, 30])
        try await ThreadBridge.offload {
            let last = try to.appendFollowed(decoded, leaderEpoch: from.log.highestEpoch)
            try to.waitFollowedDurable(last)
        }
        let mine = try follower.container(testContainer).privateDatabase(user: "u")
        for name in ["one", "two", "again", "plain"] {
            let id = RecordID(recordName: name)
            #expect(try await mine.record(for: id).fields == (try await db.record(for: id)).fields)
        }
        try await follower.close()
        try await leader.close()
    }

    /// A replica whose catalog trails its partition (they follow on separate streams) knows the record type but not
    /// the asset field a newer schema added: its collection must still see that field's file as referenced.
    @Test func aCollectionOnAReplicaWhoseCatalogTrailsKeepsTheFilesOfFieldsItsSchemaLacks() async throws {
        let (dirs, leader, follower) = try await twoStores("trailing-catalog")
        defer { withExtendedLifetime(dirs) {} }
        let db = try leader.container(testContainer).privateDatabase(user: "u")
        let (from, to) = (leader.partitions[0], follower.partitions[0])
        let (fromCatalog, toCatalog) = (try #require(leader.catalog.log), follower.catalog)
        _ = try await db.save(Record(recordType: "Photo", recordName: "p0", fields: ["title": "no image yet"]))
        try await ThreadBridge.offload {
            let schema = try fromCatalog.frames(from: 1, maxBytes: 1 << 20)
            try toCatalog.waitDurableBlocking(try toCatalog.appendFollowed(schema.bytes, leaderEpoch: fromCatalog.highestEpoch))
            let frames = try from.log.frames(from: 1, maxBytes: 1 << 20)
            try to.waitFollowedDurable(try to.appendFollowed(frames.bytes, leaderEpoch: from.log.highestEpoch))
        }
        // The `image` field comes with a catalog commit this replica does not get; the record's frame it does.
        let image = [UInt8](repeating: 9, count: 4096)
        _ = try await db.save(Record(recordType: "Photo", recordName: "p1", fields: ["image": .asset(AssetReference(data: image))]))
        let blob = try follower.assets.importBytes(image)
        try await ThreadBridge.offload {
            let frames = try from.log.frames(from: to.log.lastLSN + 1, maxBytes: 1 << 20)
            try to.waitFollowedDurable(try to.appendFollowed(frames.bytes, leaderEpoch: from.log.highestEpoch))
        }
        let zone = try #require(Array(to.queryView().keys.zoneKeys).first)
        func fields(_ store: CloudletStore) -> [String]? {
            store.catalog.snapshot().schema.recordType(SchemaKey(zone: zone), "Photo").map { $0.fields.keys.sorted() }
        }
        #expect(fields(follower) == ["title"] && fields(leader) == ["image", "title"])
        try await Task.sleep(for: .seconds(1.1))
        let report = try await follower.collectAssetGarbage(gracePeriod: 0)
        #expect(report.deletedFiles == 0 && follower.assets.exists(blob.checksum))
        try await follower.close()
        try await leader.close()
    }
}
