import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

/// Opens a store whose every file is behind `fileSystem`, off the cooperative pool (opening blocks).
func openStore(
    at path: String, on fileSystem: any FileSystem, configuration: StoreConfiguration
) async throws -> CloudletStore {
    try await ThreadBridge.offload { try CloudletStore(path: path, configuration: configuration, fileSystem: fileSystem) }
}

/// The records among `names` that exist in `zone`, by name.
func existingRecords(_ db: Database, _ names: some Sequence<String>, zone: ZoneID = .default) async throws
    -> [String: Record]
{
    var out: [String: Record] = [:]
    for name in names {
        do { out[name] = try await db.record(for: RecordID(recordName: name, zoneID: zone)) } catch CloudletError.Code
            .unknownItem
        {}
    }
    return out
}

/// The records among `names` in the default zone of `db`, by name, as "title count".
func contents(_ db: Database, names: some Sequence<String>) async throws -> [String: String] {
    try await existingRecords(db, names).mapValues { r in
        "\(r["title"].map { "\($0)" } ?? "-") \(r["count"].map { "\($0)" } ?? "-")"
    }
}

@Suite("A whole store on the file-system seam")
struct StoreFileSystemTests {
    @Test("open, write, checkpoint, compact, close and reopen run entirely on the in-memory file system")
    func wholeStoreInMemory() async throws {
        let fs = InMemoryFileSystem()
        let path = "/cloudlet-in-memory-\(UUID().uuidString)/store"
        var config = StoreConfiguration(durability: .fsync)
        config.segmentSize = 4 << 10
        config.compaction = .manual
        let store = try await openStore(at: path, on: fs, configuration: config)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        var expected: [String: String] = [:]
        for round in 0..<12 {
            for i in 0..<10 {
                let name = "n\(i)"
                var r = (try? await db.record(for: RecordID(recordName: name))) ?? note(name)
                r["title"] = .string("round \(round)")
                r["count"] = .int64(Int64(round * 10 + i))
                try await db.save(r)
                expected[name] = "\(FieldValue.string("round \(round)")) \(FieldValue.int64(Int64(round * 10 + i)))"
            }
            if round == 5 { try await store.checkpoint() }
        }
        for name in ["n3", "n7"] {
            try await db.deleteRecord(RecordID(recordName: name))
            expected[name] = nil
        }
        let reports = try await store.compact(includeActiveSegment: true)
        #expect(reports.first?.bytesReclaimed ?? 0 > 0, "the updates left dead bytes for compaction to reclaim")
        try await db.save(note("after-compaction", title: "late", count: 99))
        expected["after-compaction"] = "\(FieldValue.string("late")) \(FieldValue.int64(99))"
        let names = Array(expected.keys) + ["n3", "n7"]
        #expect(try await contents(db, names: names) == expected)
        try await store.close()

        // Nothing reached the real disk: the metadata, the lock, the catalog and the partition are all in memory.
        #expect(!FileManager.default.fileExists(atPath: Path.parent(path)))
        let top = try Set(fs.listDirectory(path))
        #expect(top.isSuperset(of: [StoreMetadata.fileName, "LOCK", Catalog.directoryName, "p0000"]))
        #expect(try fs.listDirectory(path + "/p0000/index").contains { $0.hasSuffix(SortedRunFile.suffix) }, "the index")
        #expect(try fs.listDirectory(path + "/p0000").contains { $0.contains("-g") }, "a compacted segment")

        let reopened = try await openStore(at: path, on: fs, configuration: config)
        #expect(reopened.metadata == store.metadata)
        #expect(reopened.statistics.framesReplayed == 0, "close wrote checkpoints covering everything")
        let again = try reopened.container(testContainer).privateDatabase(user: "u")
        #expect(try await contents(again, names: names) == expected)
        try await reopened.close()
    }

    @Test("the store lock works on the in-memory file system: a second open is refused until the first closes")
    func lockInMemory() async throws {
        let fs = InMemoryFileSystem()
        let config = StoreConfiguration(durability: .os)
        let store = try await openStore(at: "/s", on: fs, configuration: config)
        let refused = await expectError(.locked) { try await openStore(at: "/s", on: fs, configuration: config) }
        #expect(refused?.message.contains("/s is locked") == true)
        // Another file system is another machine: the same path there is another store.
        let elsewhere = try await openStore(at: "/s", on: InMemoryFileSystem(), configuration: config)
        try await elsewhere.close()
        try await store.close()
        try await openStore(at: "/s", on: fs, configuration: config).close()
    }
}
