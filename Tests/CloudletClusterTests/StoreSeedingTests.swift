import Cloudlet
import CloudletCore
import CloudletTestSupport
import Foundation
import Testing

@testable import CloudletCluster

/// Moving a staged seed into place (``StoreSeeding/finish(at:)``, docs/replication.md, "Seeding a node from files"),
/// on real stores and no cluster: a copy without its `COMPLETE` mark is discarded and the empty store stays as it
/// was; a complete one is installed, also when a crash stopped an earlier install half-way.
struct StoreSeedingTests {
    /// A store holding `count` records, closed; its id.
    private func source(_ path: String, count: Int) async throws -> String {
        let store = try await CloudletStore.open(at: path)
        let db = try store.container("iCloud.com.example.app").privateDatabase(user: "alice")
        for i in 0..<count {
            var r = Record(recordType: "Note", recordName: "n\(i)")
            r["v"] = .int64(Int64(i))
            _ = try await db.save(r)
        }
        let id = store.metadata.storeID
        try await store.close()
        return id
    }

    /// Copies the store at `from` (its `CLOUDLET` and log directories) into `into`'s staging directory, with the
    /// `COMPLETE` mark or without.
    private func stage(from: String, into: String, complete: Bool) throws {
        let fm = FileManager.default
        let staging = into + "/" + StoreSeeding.stagingName
        try fm.createDirectory(atPath: staging, withIntermediateDirectories: true)
        for name in try fm.contentsOfDirectory(atPath: from) where StoreSeeding.isStoreEntry(name) {
            try fm.copyItem(atPath: from + "/" + name, toPath: staging + "/" + name)
        }
        if complete { fm.createFile(atPath: staging + "/" + StoreSeeding.completeName, contents: Data()) }
    }

    private func names(_ path: String) async throws -> (id: String, count: Int) {
        let store = try await CloudletStore.open(at: path)
        let db = try store.container("iCloud.com.example.app").privateDatabase(user: "alice")
        let found = try await db.records(for: (0..<50).map { RecordID(recordName: "n\($0)") })
        let id = store.metadata.storeID
        try await store.close()
        return (id, found.filter { (try? $0.get()) != nil }.count)
    }

    @Test func anUnmarkedCopyIsDiscardedAndAMarkedOneIsInstalledEvenAfterAnInstallCutShort() async throws {
        let dir = TempDir("store-seeding")
        let sourceID = try await source(dir.sub("source"), count: 30)
        let target = dir.sub("target")
        try await CloudletStore.open(at: target).close()
        let targetID = try await names(target).id
        let staging = target + "/" + StoreSeeding.stagingName

        // Interrupted copy: discarded, the store is the empty one it was.
        try stage(from: dir.sub("source"), into: target, complete: false)
        #expect(try StoreSeeding.finish(at: target) == .discarded)
        #expect(!FileManager.default.fileExists(atPath: staging))
        let empty = try await names(target)
        #expect(empty.id == targetID && empty.count == 0)

        // A complete copy whose install a crash cut short: the empty store's CLOUDLET deleted and the catalog moved
        // into place already, the partitions and CLOUDLET still staged. The next start finishes it.
        try stage(from: dir.sub("source"), into: target, complete: true)
        let fm = FileManager.default
        try fm.removeItem(atPath: target + "/" + StoreMetadata.fileName)
        try fm.removeItem(atPath: target + "/" + Catalog.directoryName)
        try fm.moveItem(atPath: staging + "/" + Catalog.directoryName, toPath: target + "/" + Catalog.directoryName)
        #expect(try StoreSeeding.finish(at: target) == .installed)
        #expect(!fm.fileExists(atPath: staging))
        let seeded = try await names(target)
        #expect(seeded.id == sourceID, "the store took the source's id")
        #expect(seeded.count == 30, "every record of the copy is there")
        #expect(try StoreSeeding.finish(at: target) == .nothing)
    }

    @Test func aStoreAnotherProcessHasOpenIsLeftAlone() async throws {
        let dir = TempDir("store-seeding-locked")
        _ = try await source(dir.sub("source"), count: 3)
        let target = dir.sub("target")
        let open = try await CloudletStore.open(at: target)
        try stage(from: dir.sub("source"), into: target, complete: false)
        #expect(throws: CloudletError.self) { try StoreSeeding.finish(at: target) }
        #expect(FileManager.default.fileExists(atPath: target + "/" + StoreSeeding.stagingName), "the copy under way is kept")
        try await open.close()
    }

    @Test func aPlanMayNameOnlyTheStoresOwnFiles() {
        for ok in ["CLOUDLET", "p0000/00000000000000000001.seg", "catalog/COMPACTED", "p0003/index/000001.run"] {
            #expect(StoreSeeding.isSafeRelativePath(ok), "\(ok)")
        }
        for bad in ["/etc/passwd", "p0000/../../x", "LOCK", "CLUSTER", "p0000", "assets/sha256/aa/x", "p0000/index/../x",
            "p0000/x/y", "CLOUDLET/x", "p0000//x"]
        {
            #expect(!StoreSeeding.isSafeRelativePath(bad), "\(bad)")
        }
    }
}
