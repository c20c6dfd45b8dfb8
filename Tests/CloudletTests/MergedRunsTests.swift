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
        let index = try #require(store.partitions[0].index)
        let directory = Partition.indexDirectory("/store/p0000")
        func runFiles() throws -> Set<String> { Set(try fs.listDirectory(directory).filter { $0.hasSuffix(".run") }) }
        let before = try runFiles().count
        #expect(before > 2, "the writes flushed several runs")

        // No write after this merge: only the merge itself can tell the directory.
        try await ThreadBridge.offload { try index.mergeAll() }
        let live = index.runsView().runFileNumbers
        #expect(live.count < before)
        #expect(try runFiles().count == live.count, "the runs merged away are no longer held by the key directory")
        let read = try await existingRecords(db, names)
        #expect(read.count == names.count)
        try await store.close()
    }
}
