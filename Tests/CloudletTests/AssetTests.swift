import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Assets through the embedded API: saving from a file or bytes, reading back, content addressing, the checks a
/// save makes, and the garbage collection's rules.
@Suite struct AssetTests {
    private func photo(_ name: String, _ asset: AssetReference, zone: ZoneID = .default) -> Record {
        Record(recordType: "Photo", recordName: name, zoneID: zone, fields: ["image": .asset(asset), "title": "p"])
    }

    private func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var g = SeededRandom(seed: seed)
        return (0..<count).map { _ in UInt8(truncatingIfNeeded: g.next()) }
    }

    @Test func savingFromAFileCopiesItAndReadingGivesTheSameBytes() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let content = bytes(3 << 20 + 17, seed: 1)
        let source = dir.sub("photo.jpg")
        FileManager.default.createFile(atPath: source, contents: Data(content))
        let saved = try await db.save(photo("p1", AssetReference(contentsOfFile: source)))
        guard case .asset(let a)? = saved["image"] else { Issue.record("no asset in \(saved)"); return }
        #expect(a.fileChecksum == SHA256Stream.hex(of: content))
        #expect(a.size == Int64(content.count))
        #expect(a.sourceFile == nil && a.receipt == nil)
        try FileManager.default.removeItem(atPath: source)  // the store has its own copy
        let read = try await db.record(for: saved.id)
        #expect(read["image"] == .asset(a))
        #expect(try await store.assetData(a) == content)
        #expect(FileManager.default.contents(atPath: try store.assetFile(a)) == Data(content))
        try await store.close()
    }

    /// A replica's copy fetched from a peer (`BlobStore.adopt`): named only when its size and hash are the asset's;
    /// a bad or short copy leaves nothing behind, not even its temporary file.
    @Test func adoptingACopyNamesItOnlyWhenItsSizeAndHashMatch() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let blobs = store.assets
        let content = bytes(300_000, seed: 7)
        let checksum = SHA256Stream.hex(of: content)
        func copy(_ b: [UInt8]) throws -> String {
            let temp = try blobs.temporaryPath()
            FileManager.default.createFile(atPath: temp, contents: Data(b))
            return temp
        }
        var flipped = content
        flipped[1234] ^= 1
        for (bad, size) in [(flipped, content.count), (Array(content.prefix(299_999)), content.count), (content, content.count + 1)] {
            let temp = try copy(bad)
            let error = try #require(throws: CloudletError.self) { try blobs.adopt(temp, checksum: checksum, size: Int64(size)) }
            #expect(error.code == .corruption)
            #expect(!blobs.exists(checksum))
            #expect(!FileManager.default.fileExists(atPath: temp))
        }
        let temp = try copy(content)
        try blobs.adopt(temp, checksum: checksum, size: Int64(content.count))
        #expect(try blobs.read(checksum) == content)
        #expect(try blobs.verify(checksum))
        #expect(!FileManager.default.fileExists(atPath: temp))
        // The same bytes again: the blob stays as it is, the copy goes.
        let again = try copy(content)
        try blobs.adopt(again, checksum: checksum, size: Int64(content.count))
        #expect(!FileManager.default.fileExists(atPath: again) && blobs.exists(checksum))
        try await store.close()
    }

    @Test func identicalBytesAreStoredOnce() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let content = bytes(100_000, seed: 2)
        _ = try await db.save(photo("a", AssetReference(data: content)))
        _ = try await db.save(photo("b", AssetReference(data: content)))
        _ = try await db.save(photo("c", AssetReference(data: [1, 2, 3])))
        let stats = try await store.assetStatistics()
        #expect(stats.files == 2)
        #expect(stats.bytes == Int64(content.count + 3))
        try await store.close()
    }

    @Test func aListOfAssetsIsSavedAndReadBack() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        var r = Record(recordType: "Album", recordName: "al", zoneID: .default)
        r["pages"] = .list(.asset, [.asset(AssetReference(data: [1])), .asset(AssetReference(data: [2, 2]))])
        let saved = try await db.save(r)
        let assets = saved["pages"]?.assets ?? []
        #expect(assets.map(\.size) == [1, 2])
        #expect(try await store.assetData(assets[1]) == [2, 2])
        #expect(try store.referencedAssets() == Set(assets.map(\.fileChecksum)))
        try await store.close()
    }

    @Test func aChecksumTheStoreDoesNotHoldFailsTheRecordNamingTheField() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Photos")
        try await db.createZone(zone)
        let missing = AssetReference(fileChecksum: String(repeating: "ab", count: 32), size: 5)
        let results = try await db.modify(
            [.create(photo("bad", missing, zone: zone)), .create(photo("good", AssetReference(data: [9]), zone: zone))],
            atomic: true)
        #expect(results[0].code == .invalidArguments)
        #expect(results[0].error?.message.contains("field 'image'") == true)
        #expect(results[1].code == .batchRequestFailed)  // the atomic zone: all or nothing
        let malformed = try await db.modify([.create(photo("x", AssetReference(fileChecksum: "nope", size: 1)))])
        #expect(malformed[0].code == .invalidArguments)
        #expect(malformed[0].error?.message.contains("field 'image'") == true)
        let gone = try await db.modify([.create(photo("y", AssetReference(contentsOfFile: dir.sub("absent"))))])
        #expect(gone[0].code == .invalidArguments)
        try await store.close()
    }

    @Test func anAssetRuleFailsTheOperationAndReceiptsAreNotStored() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let saved = try await db.save(photo("p", AssetReference(data: [7, 7])))
        var withReceipt = saved["image"]!.assets[0]
        withReceipt.receipt = "r"
        var again = photo("q", withReceipt)
        again["note"] = "x"
        let rule: AssetRule = { use in
            if use.asset.receipt == nil { throw CloudletError.invalid("field '\(use.field)': no receipt") }
        }
        let results = try await db.modify([.create(again), .create(photo("z", saved["image"]!.assets[0]))], assetRule: rule)
        #expect(results[0].record?["image"]?.assets.first?.receipt == nil)
        #expect(results[1].code == .invalidArguments)
        #expect(try await db.record(for: RecordID(recordName: "q"))["image"]?.assets.first?.receipt == nil)
        try await store.close()
    }

    @Test func garbageCollectionDeletesOnlyWhatNoLiveRecordReferences() async throws {
        let dir = TempDir()
        let store = try await openStore(dir, partitions: 2)
        let alice = try store.container(testContainer).privateDatabase(user: "alice")
        let bob = try store.container(testContainer).privateDatabase(user: "bob")
        let shared = bytes(5000, seed: 3)
        let a = try await alice.save(photo("a", AssetReference(data: shared)))
        _ = try await bob.save(photo("b", AssetReference(data: shared)))
        let lone = try await alice.save(photo("lone", AssetReference(data: bytes(7000, seed: 4))))
        let kept = try await alice.save(photo("kept", AssetReference(data: [5])))
        // An unreferenced file within the grace window stays.
        _ = try store.assets.importBytes([1, 2, 3, 4])

        _ = try await alice.modify([.forceDelete(a.id), .forceDelete(lone.id)])
        let report = try await store.collectAssetGarbage(gracePeriod: 3600)
        #expect(report.deletedFiles == 0)  // everything is recent
        #expect(report.keptUnreferenced == 2)

        let now = try await store.collectAssetGarbage(gracePeriod: -10)
        #expect(now.deletedFiles == 2)  // the lone photo and the unreferenced upload
        #expect(now.referenced == 2)
        #expect(try await store.assetData(kept["image"]!.assets[0]) == [5])
        #expect(try await store.assetData(AssetReference(fileChecksum: SHA256Stream.hex(of: shared), size: 0)) == shared)
        await expectError(.unknownItem) { try await store.assetData(lone["image"]!.assets[0]) }
        try await store.close()
    }

    @Test func garbageCollectionNeverDeletesABlobASaveInFlightHasPinned() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let blob = try store.assets.importBytes([4, 2])
        // A save that pins the blob after the sweep took its (empty) reference set, and commits before it deletes.
        let report = try store.assets.collect(
            referenced: {
                #expect(store.assets.pin([blob.checksum]).isEmpty)
                store.assets.unpin([blob.checksum])
                return []
            }, cutoff: .infinity)
        #expect(report.deleted == 0)
        #expect(store.assets.exists(blob.checksum))
        // The next sweep, with nothing pinned and nothing referencing it, deletes it.
        #expect(try store.assets.collect(referenced: { [] }, cutoff: .infinity).deleted == 1)
        #expect(!store.assets.exists(blob.checksum))
        try await store.close()
    }

    @Test("refreshing a blob (assets/rereference) starts its grace window again, and a sweep under way keeps it")
    func refreshingABlobStartsItsGraceWindowAgain() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let blob = try store.assets.importBytes([7, 7, 7])
        let path = store.assets.path(of: blob.checksum)
        // An hour old, unreferenced: a collection with a 10-minute grace window would take it…
        var old = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
        // …but it was refreshed: its window starts now.
        #expect(store.assets.refresh(blob.checksum))
        #expect(try store.assets.collect(referenced: { [] }, cutoff: Date().timeIntervalSince1970 - 600).deleted == 0)
        // Refreshed while a sweep is between taking the references and deleting: kept too.
        #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)
        let report = try store.assets.collect(
            referenced: {
                #expect(store.assets.refresh(blob.checksum))
                #expect(utimensat(AT_FDCWD, path, &old, 0) == 0)  // even if its time were old again
                return []
            }, cutoff: Date().timeIntervalSince1970 - 600)
        #expect(report.deleted == 0 && store.assets.exists(blob.checksum))
        // Not refreshed, it goes; and a blob the store lacks cannot be refreshed.
        #expect(try store.assets.collect(referenced: { [] }, cutoff: Date().timeIntervalSince1970 - 600).deleted == 1)
        #expect(!store.assets.refresh(blob.checksum))
        try await store.close()
    }

    @Test func collectionsAtTheSameTimeTakeTurns() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        for i in 0..<20 { _ = try store.assets.importBytes([UInt8(i)]) }
        let deleted = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<4 { group.addTask { try await store.collectAssetGarbage(gracePeriod: -10).deletedFiles } }
            return try await group.reduce(0, +)
        }
        #expect(deleted == 20)  // each file deleted once, by one of them
        try await store.close()
    }

    @Test func collectionAfterZoneDeletionAndCascadeReclaimsTheFiles() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        let db = try store.container(testContainer).privateDatabase(user: "alice")
        let zone = ZoneID(zoneName: "Trip")
        let other = ZoneID(zoneName: "Other")
        try await db.createZone(zone)
        try await db.createZone(other)
        _ = try await db.save(photo("in-zone", AssetReference(data: [1, 1, 1]), zone: zone))
        let album = try await db.save(Record(recordType: "Album", recordName: "album", zoneID: other))
        var child = photo("child", AssetReference(data: [2, 2, 2]), zone: other)
        child["album"] = .reference(Reference(recordName: "album", action: .deleteSelf))
        _ = try await db.save(child)
        try await db.deleteZone(zone)
        _ = try await db.modify([.forceDelete(album.id)])  // cascades to the child
        let report = try await store.collectAssetGarbage(gracePeriod: -10)
        #expect(report.deletedFiles == 2)
        #expect(try await store.assetStatistics().files == 0)
        try await store.close()
    }

    @Test func partialWritesAreRemovedWhenTheStoreOpens() async throws {
        let dir = TempDir()
        var store = try await openStore(dir)
        _ = try store.assets.importBytes([1])
        let tmp = store.assets.directory + "/tmp/123-1-1.part"
        try await store.close()
        FileManager.default.createFile(atPath: tmp, contents: Data([1, 2, 3]))
        store = try await openStore(dir)
        #expect(!FileManager.default.fileExists(atPath: tmp))
        #expect(try await store.assetStatistics().files == 1)
        try await store.close()
    }

    @Test func aWriteOverTheLimitKeepsNothing() async throws {
        let dir = TempDir()
        let store = try await openStore(dir)
        var left = 10_000
        #expect(throws: BlobStore.TooLarge.self) {
            try store.assets.write(maxSize: 4096) { buffer in
                let n = min(buffer.count, left)
                left -= n
                return n
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: store.assets.directory + "/tmp").isEmpty)
        #expect(try await store.assetStatistics().files == 0)
        try await store.close()
    }
}
