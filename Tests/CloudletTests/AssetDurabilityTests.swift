import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// An upload syncs its file but leaves its name (the shard directory's entry) to the first save that references it
/// (`BlobStore.makeDurable`): a power failure may take an upload no record references yet, never the file of a
/// record that committed. Power failures are simulated by the in-memory file system, which drops every directory
/// entry not fsync'd (a SIGKILL could not show this: the kernel keeps the entries of a killed process).
@Suite struct AssetDurabilityTests {
    static let path = "/store"

    static func open(_ fs: InMemoryFileSystem) async throws -> (CloudletStore, Database) {
        let store = try await openStore(at: path, on: fs, configuration: StoreConfiguration(durability: .fsync))
        return (store, try store.container(testContainer).privateDatabase(user: "u"))
    }

    static func photo(_ name: String, _ asset: AssetReference) -> Record {
        var r = Record(recordType: "Photo", recordName: name)
        r["image"] = .asset(asset)
        return r
    }

    @Test func aCommittedRecordsUploadedFileSurvivesAPowerFailure() async throws {
        let fs = InMemoryFileSystem()
        var (store, db) = try await Self.open(fs)
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        // As the upload URL stores it: synced bytes, name not yet synced.
        let blobs = store.assets
        let uploaded = try await ThreadBridge.offload { try blobs.importBytes(bytes, syncName: false) }
        try await db.save(Self.photo("p", AssetReference(fileChecksum: uploaded.checksum, size: uploaded.size)))
        // An upload no save has referenced yet.
        let orphan = try await ThreadBridge.offload { try blobs.importBytes([1, 2, 3], syncName: false) }
        #expect(store.assets.exists(orphan.checksum))
        fs.crash()
        (store, db) = try await Self.open(fs)
        let r = try await db.record(for: RecordID(recordName: "p"))
        let asset = try #require(r["image"]?.assets.first)
        #expect(asset.fileChecksum == uploaded.checksum)
        #expect(try await store.assetData(asset) == bytes, "the saved record's file did not survive the power failure")
        // The orphan's name was never synced: gone, and a save naming it fails cleanly, asking for the upload again.
        #expect(!store.assets.exists(orphan.checksum))
        await #expect(throws: CloudletError.self) {
            try await db.save(Self.photo("q", AssetReference(fileChecksum: orphan.checksum, size: orphan.size)))
        }
        #expect((try? await db.record(for: RecordID(recordName: "q"))) == nil)
        try await store.close()
    }

    /// The 256 shard directories are made (and synced) before the first write, so that an upload into a shard no
    /// file has used yet syncs no directory: it pays its file's one sync, not a second for a new shard.
    @Test func uploadsIntoNewShardsSyncNoDirectory() throws {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        try fs.createDirectory("/store")
        let blobs = try BlobStore(directory: "/store/assets", fileSystem: fs, readOnly: false)
        _ = try blobs.importBytes([0], syncName: false)
        #expect(try fs.listDirectory("/store/assets/sha256").count == 256)
        let syncs = fs.directorySyncCount
        var shards: Set<String> = []
        for i in 1...40 {
            let blob = try blobs.importBytes(Array("file \(i)".utf8), syncName: false)
            shards.insert(String(blob.checksum.prefix(2)))
        }
        #expect(shards.count > 30, "the files should land in many shards")
        #expect(fs.directorySyncCount == syncs, "an upload synced a directory")
    }

    @Test func anEmbeddedSaveOfNewBytesSurvivesAPowerFailure() async throws {
        let fs = InMemoryFileSystem()
        var (store, db) = try await Self.open(fs)
        let bytes = Array("a photo's bytes".utf8)
        let saved = try await db.save(Self.photo("e", AssetReference(data: bytes)))
        let asset = try #require(saved["image"]?.assets.first)
        fs.crash()
        (store, db) = try await Self.open(fs)
        #expect(try await db.record(for: RecordID(recordName: "e"))["image"]?.assets.first?.fileChecksum == asset.fileChecksum)
        #expect(try await store.assetData(asset) == bytes)
        try await store.close()
    }

    @Test func anUploadDuplicatingAnUnsyncedFileIsMadeDurableByItsSave() async throws {
        let fs = InMemoryFileSystem()
        var (store, db) = try await Self.open(fs)
        let blobs = store.assets
        let bytes = Array(repeating: UInt8(9), count: 70_000)
        _ = try await ThreadBridge.offload { try blobs.importBytes(bytes, syncName: false) }
        // The same bytes again: found in place (not renamed again), still to be synced by the save.
        let again = try await ThreadBridge.offload { try blobs.importBytes(bytes, syncName: false) }
        try await db.save(Self.photo("d", AssetReference(fileChecksum: again.checksum, size: again.size)))
        fs.crash()
        (store, db) = try await Self.open(fs)
        #expect(store.assets.exists(again.checksum))
        #expect(try await store.assetData(AssetReference(fileChecksum: again.checksum, size: again.size)) == bytes)
        try await store.close()
    }
}
