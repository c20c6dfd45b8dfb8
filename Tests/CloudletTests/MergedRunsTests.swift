import CloudletConcurrency
import CloudletStorage
import CloudletTestSupport
import Testing

@testable import Cloudlet

@Suite("The key directory takes the index's merged runs when a merge is installed, not at the next write")
struct MergedRunsTests {
    @Test("a store that stopped writing reads through the merged runs and lets the merged-away files go")
    func mergedRunsAreTakenWithoutAWrite() async throws {
        let fs = InMemoryFileSystem()
        var config = StoreConfiguration(durability: .os)
        config.memtableSize = 16 << 10  // a flush every few batches: several level-0 runs
        config.compaction = .manual
        let store = try await openStore(at: "/store", on: fs, configuration: config)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        let names = (0..<400).map { "r\($0)" }
        for batch in stride(from: 0, to: names.count, by: 20) {
            let ops = names[batch..<batch + 20].map { RecordOperation.create(note($0, title: String(repeating: "x", count: 100))) }
            _ = try await db.modify(ops)
        }
        let partition = store.partitions[0]
        let index = try #require(partition.index)
        // Everything in one run at the bottom (a flush first: it waits for one the writes started, which would
        // otherwise land after the merge), then one more record flushed: a single level-0 run over it, which no
        // background merge takes (level 0 is below its trigger, the bottom level under its budget).
        _ = try await ThreadBridge.offload { try partition.flushIndex(force: true) }
        try await ThreadBridge.offload { try index.mergeAll() }
        _ = try await db.save(note("last"))
        _ = try await ThreadBridge.offload { try partition.flushIndex(force: true) }
        let runs = index.runs
        try #require(runs.count == 2 && runs.contains { $0.level == 0 }, "\(runs)")
        let directory = Partition.indexDirectory("/store/p0000")
        func runFiles() throws -> Set<String> { Set(try fs.listDirectory(directory).filter { $0.hasSuffix(".run") }) }
        #expect(try runFiles().count == 2)

        // No write after this merge: only the merge itself can tell the directory.
        try await ThreadBridge.offload { try index.mergeAll() }
        let live = index.runsView().runFileNumbers
        #expect(live.count == 1)
        #expect(try runFiles().count == live.count, "the runs merged away are no longer held by the key directory")
        let read = try await existingRecords(db, names)
        #expect(read.count == names.count)
        #expect(try await db.record(for: RecordID(recordName: "last"))["title"] == .string("t"))
        try await store.close()
    }
}
