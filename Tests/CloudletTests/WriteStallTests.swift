import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Synchronization
import Testing

@testable import Cloudlet

/// A store whose index flushes can be held (their fdatasyncs stalled) or failed, with a tiny memtable, so that
/// writers fill the next memtable while a flush is stuck: the write stall (``PartitionWriter``).
private struct StallingStore {
    static let path = "/store"
    /// Whether `path` is a file of partition 0's index (its runs and manifest).
    static let indexFile: FaultInjectingFileSystem.PathFilter = { $0.hasPrefix(Partition.indexDirectory(path + "/p0000") + "/") }
    static let memtableSize = 16 << 10

    let faults = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
    let store: CloudletStore
    var db: Database { try! store.container(testContainer).privateDatabase(user: "u") }
    var configuration: StoreConfiguration {
        var config = StoreConfiguration(durability: .os)
        config.memtableSize = Self.memtableSize
        config.compaction = .manual
        return config
    }

    init() async throws {
        var config = StoreConfiguration(durability: .os)
        config.memtableSize = Self.memtableSize
        config.compaction = .manual
        store = try await openStore(at: Self.path, on: faults, configuration: config)
    }

    /// Batch `i` of `size` records (about 300 bytes each in the memtable).
    static func batch(_ i: Int, size: Int = 10) -> [RecordOperation] {
        (0..<size).map { k in .create(note("r\(i)-\(k)", title: String(repeating: "x", count: 100), count: Int64(i))) }
    }
}

@Suite("Write stall: writers wait while the key directory's memtable is full and a flush is stuck")
struct WriteStallTests {
    @Test("writers stall while a flush is held, the memtable stays bounded, and they resume once it ends")
    func writersStallAndResume() async throws {
        let s = try await StallingStore()
        let limit = s.store.configuration.writeStallMemtableSize
        #expect(limit == 2 * StallingStore.memtableSize)
        s.faults.stallFdatasync(matching: StallingStore.indexFile)
        let batches = 60
        let done = Counter()
        let db = s.db
        let writer = Task {
            for i in 0..<batches {
                _ = try await db.modify(StallingStore.batch(i))
                done.add()
            }
        }
        try await eventually("the writers stall") { s.store.statistics.partitionsStalled == 1 }
        let stalled = s.store.statistics
        #expect(s.faults.stalledFdatasyncCalls == 1, "the flush is the one held")
        #expect(done.value < batches, "the writer is held")
        // Bounded by the stall limit plus the one commit that crossed it (ten records).
        #expect(stalled.memtableBytes >= limit)
        #expect(stalled.memtableBytes < limit + 8 << 10, "memtable \(stalled.memtableBytes) bytes, limit \(limit)")
        #expect(stalled.writeStalls == 1)
        s.faults.resumeFdatasync()
        try await writer.value
        let after = s.store.statistics
        #expect(after.partitionsStalled == 0)
        #expect(after.writeStalls >= 1)
        #expect(after.writeStallMicroseconds > 0)
        #expect(after.records == batches * 10)
        let last = try await db.record(for: RecordID(recordName: "r\(batches - 1)-9"))
        #expect(last["count"] == .int64(Int64(batches - 1)))
        try await s.store.close()
    }

    @Test("a flush that fails while writers are stalled releases them with its error, and the partition is read-only")
    func failedFlushReleasesStalledWriters() async throws {
        let s = try await StallingStore()
        s.faults.stallFdatasync(matching: StallingStore.indexFile)
        let db = s.db
        let writer = Task {
            for i in 0..<1000 { _ = try await db.modify(StallingStore.batch(i)) }
        }
        try await eventually("the writers stall") { s.store.statistics.partitionsStalled == 1 }
        // The held fdatasync of the flush fails once it goes on.
        s.faults.failFdatasync(nth: 1, errno: EIO, matching: StallingStore.indexFile)
        s.faults.resumeFdatasync()
        let error = await expectError(.readOnly) { try await writer.value }
        #expect(error?.message.contains("flushing its index failed") == true, "\(String(describing: error))")
        #expect(s.store.statistics.partitionsStalled == 0)
        // Later writes are refused with the same reason.
        let later = await expectError(.readOnly) { try await db.modify(StallingStore.batch(5000)) }
        #expect(later?.message.contains("flushing its index failed") == true)
        #expect(!s.store.statistics.readOnlyReasons.isEmpty)
        try? await s.store.close()
    }

    @Test("a save whose task is cancelled while it waits for durability throws CancellationError; its commit stays")
    func cancelledWhileWaitingForDurability() async throws {
        var config = StoreConfiguration(durability: .fsync)
        config.compaction = .manual
        let faults = FaultInjectingFileSystem(wrapping: InMemoryFileSystem())
        let store = try await openStore(at: StallingStore.path, on: faults, configuration: config)
        let db = try store.container(testContainer).privateDatabase(user: "u")
        // The record type exists first: the save below then needs no catalog commit (whose own wait would be the one
        // cancelled, before the record's commit).
        _ = try await db.save(note("n0"))
        let segment: FaultInjectingFileSystem.PathFilter = { $0.hasSuffix(".seg") }
        faults.stallFdatasync(matching: segment)
        let save = Task { try await db.save(note("n1", title: "kept")) }
        try await eventually("the commit waits for its fdatasync") { faults.stalledFdatasyncCalls == 1 }
        save.cancel()
        await #expect(throws: CancellationError.self) { try await save.value }
        faults.resumeFdatasync()
        // Staged before the cancellation: durable now, and read back.
        let r = try await db.record(for: RecordID(recordName: "n1"))
        #expect(r["title"] == .string("kept"))
        try await store.close()
    }

    @Test("a save whose task is cancelled while it waits for the partition's writer throws CancellationError and writes nothing")
    func cancelledWhileQueuedForTheWriter() async throws {
        let s = try await StallingStore()
        let partition = s.store.partitions[0]
        // Hold the writer with a stall: a flush under way and a full memtable.
        partition.writer.flushStarted(memtableBytes: 0)
        partition.writer.noteMemtable(bytes: s.store.configuration.writeStallMemtableSize)
        let db = s.db
        let save = Task { try await db.save(note("never")) }
        try await eventually("the save waits for the writer") { partition.writer.statistics.waiting == 1 }
        save.cancel()
        await #expect(throws: CancellationError.self) { try await save.value }
        partition.writer.flushFinished(failure: nil)
        await expectError(.unknownItem) { try await db.record(for: RecordID(recordName: "never")) }
        #expect(s.store.statistics.writesCancelled == 1)
        try await s.store.close()
    }
}
