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

    /// A blob store at `/store/assets` (its directories made) on a fault-injecting in-memory file system.
    static func blobStore() throws -> (FaultInjectingFileSystem, BlobStore) {
        let fs = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        try fs.createDirectory("/store")
        let blobs = try BlobStore(directory: "/store/assets", fileSystem: fs, readOnly: false)
        try blobs.prepareDirectories()
        return (fs, blobs)
    }

    /// Pieces of `bytes`, `size` at a time, as an upload's body gives them (valid until the next call).
    static func pieces(_ bytes: [UInt8], _ size: Int) -> (next: () -> UnsafeRawBufferPointer, ended: () -> Bool, calls: () -> Int) {
        let holder = Pieces(bytes)  // captured by `next`: freed with it
        var offset = 0
        var calls = 0
        let next = { () -> UnsafeRawBufferPointer in
            calls += 1
            let n = min(size, bytes.count - offset)
            defer { offset += n }
            return UnsafeRawBufferPointer(rebasing: holder.storage[offset..<offset + n])
        }
        return (next, { offset >= bytes.count }, { calls })
    }

    /// A piece is written on another thread while it is hashed (BlobStore's FileWriter): its failure still fails the
    /// write, and nothing is kept — no blob named, no temporary file left.
    @Test func aWriteThatFailsBesideTheHashingKeepsNothing() throws {
        let (fs, blobs) = try Self.blobStore()
        fs.failWrites(errno: ENOSPC, keeping: 1000)
        let bytes = (0..<700_000).map { UInt8(truncatingIfNeeded: $0) }
        let source = Self.pieces(bytes, 256 << 10)
        #expect(throws: CloudletError.self) { try blobs.write(syncName: false, next: source.next) }
        #expect(source.calls() == 1, "the write went on after its first piece failed")
        #expect(try fs.listDirectory("/store/assets/tmp").isEmpty, "the temporary file was left behind")
        #expect(!blobs.exists(SHA256Stream.hex(of: bytes)))
    }

    /// With `ended` (an upload with a Content-Length), the file's fdatasync starts with its last piece, beside that
    /// piece's hashing, before the source is asked for more; and a failed sync still names nothing.
    @Test func theLastPieceStartsTheSyncAndAFailedSyncNamesNothing() throws {
        let (fs, blobs) = try Self.blobStore()
        let bytes = (0..<600_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let source = Self.pieces(bytes, 256 << 10)
        let before = fs.fdatasyncCount
        var syncsWhenAskedAfterTheEnd: Int?
        let blob = try blobs.write(syncName: false, ended: source.ended) {
            if source.ended() { syncsWhenAskedAfterTheEnd = fs.fdatasyncCount - before }
            return source.next()
        }
        #expect(syncsWhenAskedAfterTheEnd == 1, "the file was not synced with its last piece")
        #expect(fs.fdatasyncCount - before == 1, "one sync per file")
        #expect(try blobs.read(blob.checksum) == bytes)

        fs.failFdatasync(errno: EIO)
        let other = Array(bytes.reversed())
        let failing = Self.pieces(other, 256 << 10)
        #expect(throws: CloudletError.self) { try blobs.write(syncName: false, ended: failing.ended, next: failing.next) }
        #expect(try fs.listDirectory("/store/assets/tmp").isEmpty)
        #expect(!blobs.exists(SHA256Stream.hex(of: other)), "a file whose sync failed was named")
    }

    /// The temporary file is created on the writer's thread while the upload's first piece is awaited, not after it
    /// came (its creation is a few hundred microseconds of a 1 MB upload: docs/assets.md, *Speed*).
    @Test func theTemporaryFileIsCreatedWhileTheFirstPieceIsAwaited() throws {
        let (fs, blobs) = try Self.blobStore()
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let source = Self.pieces(bytes, 256 << 10)
        var createdBeforeTheFirstPiece = false
        let blob = try blobs.write(syncName: false) {
            if source.calls() == 0 {
                // Waits (10 s at most) for the writer's thread to create the file, before any piece is given.
                let deadline = ContinuousClock.now + .seconds(10)
                while ContinuousClock.now < deadline && !createdBeforeTheFirstPiece {
                    createdBeforeTheFirstPiece = !(try fs.listDirectory("/store/assets/tmp")).isEmpty
                    if !createdBeforeTheFirstPiece { usleep(1_000) }
                }
            }
            return source.next()
        }
        #expect(createdBeforeTheFirstPiece, "the temporary file was not created before the first piece came")
        #expect(try blobs.read(blob.checksum) == bytes)
        #expect(try fs.listDirectory("/store/assets/tmp").isEmpty)
    }

    /// The writer starts each piece's writeback as soon as it has written it, except the last one's, which the sync
    /// writes: a 1 MB upload's sync has one piece left (docs/assets.md, *Writing a file*).
    @Test func eachPieceButTheLastHasItsWritebackStarted() throws {
        let (fs, blobs) = try Self.blobStore()
        let bytes = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 11) }
        let source = Self.pieces(bytes, 256 << 10)
        var temp: String?
        let blob = try blobs.write(syncName: false, ended: source.ended) {
            if source.calls() == 1 { temp = try fs.listDirectory("/store/assets/tmp").first }
            return source.next()
        }
        #expect(try blobs.read(blob.checksum) == bytes)
        let ranges = try fs.writebacks(of: "/store/assets/tmp/" + #require(temp))
        #expect(ranges == [0..<262_144, 262_144..<524_288, 524_288..<786_432])
    }

    /// A temporary file that cannot be created fails the write with the file system's error; nothing is named.
    @Test func aTemporaryFileThatCannotBeCreatedFailsTheWrite() throws {
        let (fs, blobs) = try Self.blobStore()
        fs.failCreates(errno: ENOSPC)
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 5) }
        let source = Self.pieces(bytes, 256 << 10)
        let error = #expect(throws: CloudletError.self) { try blobs.write(syncName: false, next: source.next) }
        #expect(error?.code == .io && error?.message.contains("open") == true, "\(String(describing: error))")
        #expect(source.calls() <= 1, "the write went on after its file could not be created")
        #expect(try fs.listDirectory("/store/assets/tmp").isEmpty)
        #expect(!blobs.exists(SHA256Stream.hex(of: bytes)))
    }
}

/// A copy of some bytes at a fixed address (what an upload's pieces are), freed with the last closure holding it.
private final class Pieces {
    let storage: UnsafeMutableRawBufferPointer

    init(_ bytes: [UInt8]) {
        storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
    }

    deinit { storage.deallocate() }
}
