import CloudletConcurrency
import CloudletCore
import CloudletStorage
import CloudletTestSupport
import Foundation
import Testing

@testable import Cloudlet

#if canImport(Glibc)
import Glibc
#endif

/// A store on a fault-injecting in-memory file system, and what the tests keep of it.
struct FaultyStore {
    static let path = "/store"
    static let partitionDirectory = path + "/p0000"

    let memory = InMemoryFileSystem()
    let faults: FaultInjectingFileSystem
    let configuration: StoreConfiguration
    var store: CloudletStore
    var db: Database { try! store.container(testContainer).privateDatabase(user: "u") }
    var partition: Partition { store.partitions[0] }

    init(_ configure: (inout StoreConfiguration) -> Void = { _ in }) async throws {
        var config = StoreConfiguration(durability: .fsync)
        config.compaction = .manual
        configure(&config)
        configuration = config
        faults = FaultInjectingFileSystem(wrapping: memory)
        store = try await openStore(at: Self.path, on: faults, configuration: config)
    }

    /// Closes the store (its error, if any, is the test's to check) and opens it again on the file system
    /// underneath, without faults.
    mutating func reopen() async throws {
        faults.clearFaults()
        store = try await openStore(at: Self.path, on: faults, configuration: configuration)
    }

    /// Whether `path` is a segment of partition 0's log.
    static let partitionSegment: FaultInjectingFileSystem.PathFilter = {
        $0.hasPrefix(partitionDirectory + "/") && $0.hasSuffix(".seg")
    }

    /// The segment partition 0 appends to.
    var activeSegment: String { partition.log.segments().last!.path }
}

/// The LSN in a checkpoint file's name (`checkpoint-<20 digits>.ckpt`).
func checkpointLSN(_ name: String) -> UInt64? { UInt64(name.dropFirst("checkpoint-".count).dropLast(".ckpt".count)) }

/// The titles of the records among `names` that exist in `zone`, by name.
func titles(_ db: Database, _ names: [String], zone: ZoneID = .default) async throws -> [String: String] {
    try await existingRecords(db, names, zone: zone).compactMapValues { r in
        if case .string(let t) = r["title"] { t } else { nil }
    }
}

@Suite("Store faults: EIO, ENOSPC, damaged checkpoints, failed background work")
struct StoreFaultTests {
    // MARK: fdatasync fails with EIO

    @Test("a failed fdatasync fails the save naming EIO, turns the partition read-only for good, keeps acknowledged reads")
    func fdatasyncEIO() async throws {
        var s = try await FaultyStore()
        let db = s.db
        try await db.save(note("a", title: "A"))
        try await db.save(note("b", title: "B"))
        let acknowledged = s.partition.log.durableLSN
        let segment = s.activeSegment

        s.faults.failFdatasync(nth: 1, errno: EIO, matching: FaultyStore.partitionSegment)
        let failed = await expectError(.readOnly) { try await db.save(note("c", title: "C")) }
        let eio = String(cString: strerror(EIO))
        #expect(failed?.message.contains("partition 0 is read-only after a failed fdatasync on \(segment): \(eio)") == true)
        #expect((failed?.cause as? FileSystemError)?.errno == EIO)
        let syncs = s.faults.fdatasyncCount(of: segment)

        // Later writes fail at once with the original reason; the fdatasync is never retried.
        var updated = try await db.record(for: RecordID(recordName: "a"))
        updated["title"] = "A2"
        for attempt in [note("d"), updated] {
            let again = await expectError(.readOnly) { try await db.save(attempt) }
            #expect(again?.message == failed?.message)
        }
        #expect(s.faults.fdatasyncCount(of: segment) == syncs, "the failed fdatasync must not be retried")

        // Acknowledged data is still served; nothing unacknowledged is reported durable or served.
        #expect(try await titles(db, ["a", "b"]) == ["a": "A", "b": "B"])
        #expect(s.partition.log.durableLSN == acknowledged)
        await expectError(.readOnly) { try await db.record(for: RecordID(recordName: "c")) }

        let stats = s.store.statistics
        #expect(stats.readOnlyReasons.count == 1 && stats.readOnlyReasons[0].contains("failed fdatasync"))
        let flush = stats.backgroundErrors.first { $0.job == .flush }
        #expect(flush?.source == "partition 0" && flush?.count == 1 && flush?.message.contains(eio) == true)

        // Closing reports the failure too, and still syncs nothing of the failed partition.
        await expectError(.readOnly) { try await s.store.close() }
        #expect(s.faults.fdatasyncCount(of: segment) == syncs)

        // Power fails: what was never synced is gone; the store holds exactly what was acknowledged.
        s.memory.crash()
        try await s.reopen()
        #expect(try await titles(s.db, ["a", "b", "c", "d"]) == ["a": "A", "b": "B"])
        #expect(s.partition.log.lastLSN == acknowledged)
        try await s.store.close()
    }

    // MARK: pwrite fails with ENOSPC

    @Test("a full disk fails the batch with quotaExceeded; after reopen the store holds exactly the acknowledged commits",
          arguments: [0, 10])
    func noSpace(bytesWrittenBeforeFailing: Int) async throws {
        var s = try await FaultyStore()
        let db = s.db
        let zone = ZoneID(zoneName: "Work")
        _ = try await db.createZone(zone)
        try await db.save(note("a", title: "A"))
        _ = try await db.modify([.create(note("w1", zone: zone, title: "W1")), .create(note("w2", zone: zone, title: "W2"))])
        let acknowledged = s.partition.log.durableLSN

        s.faults.failWrites(errno: ENOSPC, keeping: bytesWrittenBeforeFailing, matching: FaultyStore.partitionSegment)
        let batch: [RecordOperation] = (3...5).map { .create(note("w\($0)", zone: zone, title: "W\($0)")) }
        let full = await expectError(.quotaExceeded) { try await db.modify(batch, atomic: true) }
        #expect(full?.message.contains("failed pwrite") == true)
        #expect(full?.message.contains(String(cString: strerror(ENOSPC))) == true)
        #expect(full?.message.contains("free space") == true)

        // Nothing more is attempted: the next write fails at once with the same error.
        let writes = s.faults.writeCount
        let next = await expectError(.quotaExceeded) { try await db.save(note("b", title: "B")) }
        #expect(next?.message == full?.message)
        #expect(s.faults.writeCount == writes)
        #expect(try await titles(db, ["a"]) == ["a": "A"])
        // The failed batch is not served: reading one of its records fails with the error.
        await expectError(.quotaExceeded) { try await db.record(for: RecordID(recordName: "w3", zoneID: zone)) }
        #expect(s.store.statistics.readOnlyReasons.first?.contains(String(cString: strerror(ENOSPC))) == true)

        await expectError(.quotaExceeded) { try await s.store.close() }
        try await s.reopen()
        let names = ["w1", "w2", "w3", "w4", "w5"]
        #expect(try await titles(s.db, ["a", "b"]) == ["a": "A"])
        #expect(try await titles(s.db, names, zone: zone) == ["w1": "W1", "w2": "W2"])
        #expect(s.partition.log.lastLSN == acknowledged)
        // Bytes of the failed write that reached the disk are a torn tail: cut off, and said so.
        let findings = s.store.statistics.recoveryFindings
        if bytesWrittenBeforeFailing > 0 {
            #expect(findings.count == 1 && findings[0].contains("cut a torn write off the end of"))
        } else {
            #expect(findings.isEmpty)
        }
        // And the store takes writes again.
        try await s.db.save(note("b", title: "B"))
        try await s.store.close()
    }

    // MARK: damaged indexes

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        /// The newest run cut short (a torn write of a flush the manifest already names).
        case torn
        /// A bit flipped in the newest run's last data block, the one holding the flushed state.
        case bitFlip
        /// The manifest's CURRENT pointer gone.
        case currentLost
        var testDescription: String { rawValue }
    }

    static var indexDirectory: String { Partition.indexDirectory(FaultyStore.partitionDirectory) }

    @Test("a damaged index is detected on open and rebuilt from the log, as a clean replay has it", arguments: Damage.allCases)
    func damagedIndex(_ damage: Damage) async throws {
        var s = try await FaultyStore { $0.durability = .os }
        let db = s.db
        var expected: [String: String] = [:]
        for round in 0..<3 {
            for i in 0..<8 {
                try await db.save(note("n\(i)-\(round)", title: "r\(round)"))
                expected["n\(i)-\(round)"] = "r\(round)"
            }
            try await db.deleteRecord(RecordID(recordName: "n0-\(round)"))
            expected["n0-\(round)"] = nil
            try await s.store.checkpoint()
        }
        try await s.store.close()
        let runs = try s.memory.listDirectory(Self.indexDirectory).filter { $0.hasSuffix(SortedRunFile.suffix) }.sorted()
        #expect(!runs.isEmpty)
        let newest = Self.indexDirectory + "/" + runs.last!
        var bytes = try #require(s.memory.contents(of: newest))
        switch damage {
        case .torn: bytes.removeLast(bytes.count / 3)
        case .bitFlip:
            let reader = try SortedRunReader(path: newest, fileNumber: SortedRunFile.number(fileName: runs.last!)!, fileSystem: s.memory)
            let last = try #require(try reader.dataBlocks.last)
            reader.close()
            bytes[Int(last.offset + last.size / 2)] ^= 0x10
        case .currentLost: break
        }
        if damage == .currentLost {
            try s.memory.remove(Self.indexDirectory + "/CURRENT")
        } else {
            s.memory.setContents(of: newest, to: bytes)
        }

        try await s.reopen()
        let findings = s.store.statistics.recoveryFindings
        #expect(findings.count == 1)
        #expect(findings.first?.hasPrefix("partition 0: set aside the index \(Self.indexDirectory)") == true, "\(findings)")
        #expect(findings.first?.hasSuffix("and rebuilt it from the log") == true)
        #expect(s.partition.checkpointLSN == nil && s.partition.framesReplayed > 0, "replayed from the start")
        let clean = try replayFromScratch(FaultyStore.partitionDirectory, fileSystem: s.memory)
        #expect(try LogicalView(s.partition.state.withLock { $0 }) == LogicalView(clean))
        #expect(try await titles(s.db, Array(expected.keys) + ["n0-0", "n0-1", "n0-2"]) == expected)
        // The open flushed the rebuilt index: the next one has nothing to report and replays nothing.
        try await s.store.close()
        try await s.reopen()
        #expect(s.store.statistics.recoveryFindings.isEmpty && s.partition.framesReplayed == 0)
        #expect(try await titles(s.db, Array(expected.keys)) == expected)
        try await s.store.close()
    }

    @Test("a flush torn by a dying process leaves the previous flush in force, the log replays the rest")
    func flushTornByCrash() async throws {
        var s = try await FaultyStore()
        let db = s.db
        for i in 0..<10 { try await db.save(note("n\(i)", title: "first")) }
        try await s.store.checkpoint()
        let first = try #require(s.partition.index?.runs.count)
        for i in 10..<20 { try await db.save(note("n\(i)", title: "second")) }

        s.faults.tearWrite(keeping: 100, matching: { $0.hasPrefix(Self.indexDirectory + "/") && $0.contains(SortedRunFile.suffix) })
        await expectError(.io) { try await s.store.checkpoint() }
        _ = try? await s.store.close()  // the "process" is dead: every write fails
        s.memory.crash()

        try await s.reopen()
        #expect(s.store.statistics.recoveryFindings.isEmpty, "a flush that never reached the manifest is not damage")
        #expect(s.partition.index?.runs.count == first)
        #expect(s.partition.framesReplayed == 10)
        let clean = try replayFromScratch(FaultyStore.partitionDirectory, fileSystem: s.memory)
        #expect(try LogicalView(s.partition.state.withLock { $0 }) == LogicalView(clean))
        let all = try await titles(s.db, (0..<20).map { "n\($0)" })
        #expect(all.count == 20 && all["n19"] == "second")
        try await s.store.close()
    }

    // MARK: background jobs

    @Test("a failed background flush is counted in the statistics with its error and turns the partition read-only; a reopen has every acknowledged record")
    func backgroundFlushFails() async throws {
        var s = try await FaultyStore()
        try await s.db.save(note("a", title: "A"))
        s.faults.failFdatasync(matching: { $0.hasPrefix(Self.indexDirectory + "/") })
        s.partition.purgeAndCheckpoint()  // what the checkpoint trigger runs in the background

        // Two reports: the flush job's error, and the partition's log turning read-only because of it.
        let errors = s.store.statistics.backgroundErrors
        #expect(errors.map(\.job) == [.checkpoint, .flush])
        #expect(errors.allSatisfy { $0.source == "partition 0" && $0.count == 1 })
        let message = errors.first?.message ?? ""
        #expect(message.contains(Self.indexDirectory) && message.contains("fdatasync"), "\(message)")
        #expect(message.contains(String(cString: strerror(EIO))))
        let reasons = s.store.statistics.readOnlyReasons
        #expect(reasons.count == 1 && reasons.first?.contains("flushing its index failed") == true, "\(reasons)")
        // No retry-and-pretend: the write is refused with the reason, and the record stays readable.
        await expectError(.readOnly) { try await s.db.save(note("b", title: "B")) }
        #expect(try await titles(s.db, ["a"]) == ["a": "A"])
        _ = try? await s.store.close()
        try await s.reopen()
        #expect(try await titles(s.db, ["a", "b"]) == ["a": "A"])
        try await s.db.save(note("b", title: "B"))
        #expect(try await titles(s.db, ["a", "b"]) == ["a": "A", "b": "B"])
        try await s.store.close()
    }

    @Test("a failed background tombstone purge is counted in the statistics with its error")
    func backgroundPurgeFails() async throws {
        let s = try await FaultyStore { $0.tombstoneRetention = -60 }  // every tombstone is past retention
        try await s.db.save(note("a", title: "A"))
        try await s.db.deleteRecord(RecordID(recordName: "a"))
        s.faults.failFdatasync(matching: FaultyStore.partitionSegment)
        s.partition.purgeAndCheckpoint()

        let errors = s.store.statistics.backgroundErrors
        let purge = try #require(errors.first { $0.job == .purge })
        #expect(purge.source == "partition 0" && purge.count == 1)
        #expect(purge.message.contains("failed fdatasync"))
        // The purge's commit failed in the log: the group commit's failure is reported too, and the checkpoint
        // after it could not be written.
        #expect(Set(errors.map(\.job)) == [.flush, .purge, .checkpoint])
        _ = try? await s.store.close()
    }

    @Test("a failed background compaction is counted in the statistics with its error; data and writes are unharmed")
    func backgroundCompactionFails() async throws {
        var s = try await FaultyStore {
            $0.durability = .os
            $0.segmentSize = 4 << 10
        }
        for round in 0..<8 {
            for i in 0..<10 { try await s.db.save(note("n\(i)", title: "r\(round)"), policy: .allKeys) }
        }
        s.faults.failWrites(errno: ENOSPC, matching: { $0.contains("-g") })  // compacted segments only
        s.partition.compactInBackground()  // what the compaction trigger runs in the background

        let stats = s.store.statistics
        let compaction = try #require(stats.backgroundErrors.first { $0.job == .compaction })
        #expect(compaction.count == 1 && compaction.message.contains(String(cString: strerror(ENOSPC))))
        #expect(stats.compactions == 0 && stats.readOnlyReasons.isEmpty)
        #expect(try s.memory.listDirectory(FaultyStore.partitionDirectory).allSatisfy { !$0.contains("-g") })

        try await s.db.save(note("late", title: "L"))
        try await s.store.close()
        try await s.reopen()
        let expected = Dictionary(uniqueKeysWithValues: (0..<10).map { ("n\($0)", "r7") }).merging(["late": "L"]) { a, _ in a }
        #expect(try await titles(s.db, Array(expected.keys)) == expected)
        try await s.store.close()
    }
}

/// Opening after a clean close reads the index's flushed state and replays nothing, whatever the zones hold.
@Suite struct IndexReopenTests {
    @Test("a clean close reopens from the index: nothing replayed, nothing reported, every zone's counts and records intact")
    func cleanCloseReopensFromTheIndex() async throws {
        var s = try await FaultyStore { $0.durability = .os }
        let db = s.db
        try await db.createZone(ZoneID(zoneName: "Big"))
        // More records in a zone than its flushed summary has bytes: counts are not byte lengths.
        for batch in 0..<5 {
            _ = try await db.modify((0..<200).map { .create(note("b\(batch)-\($0)", zone: ZoneID(zoneName: "Big"), title: "t")) })
        }
        try await db.save(note("small", title: "s"))
        try await db.deleteRecord(RecordID(recordName: "b0-0", zoneID: ZoneID(zoneName: "Big")))
        let key = try db.key(ZoneID(zoneName: "Big"))
        let before = try #require(s.partition.state.withLock { $0.zone(key) })
        try await s.store.close()

        try await s.reopen()
        #expect(s.store.statistics.recoveryFindings.isEmpty, "\(s.store.statistics.recoveryFindings)")
        #expect(s.partition.framesReplayed == 0 && s.partition.checkpointLSN != nil)
        #expect(s.partition.state.withLock { $0.zone(key) } == before)
        #expect(before.liveCount == 999 && before.entryCount == 1000)
        let clean = try replayFromScratch(FaultyStore.partitionDirectory, fileSystem: s.memory)
        #expect(try LogicalView(s.partition.state.withLock { $0 }) == LogicalView(clean))
        try await s.store.close()
    }

    @Test("damage a read finds in an index run fails that read, and the next open rebuilds the index from the log")
    func damageFoundByAReadIsRebuiltOnTheNextOpen() async throws {
        var s = try await FaultyStore { $0.durability = .os }
        let db = s.db
        let names = (0..<600).map { "r\($0)" }
        for chunk in stride(from: 0, to: names.count, by: 200) {
            _ = try await db.modify(names[chunk..<chunk + 200].map { .create(note($0, title: "t-\($0)")) })
        }
        try await s.store.close()
        let dir = Partition.indexDirectory(FaultyStore.partitionDirectory)
        let run = try #require(try s.memory.listDirectory(dir).filter { $0.hasSuffix(SortedRunFile.suffix) }.max())
        let path = dir + "/" + run
        let reader = try SortedRunReader(path: path, fileNumber: SortedRunFile.number(fileName: run)!, fileSystem: s.memory)
        #expect(try reader.dataBlocks.count > 3, "a run of several blocks")
        let victim = try reader.dataBlocks[1]  // entries, not the flushed state (the last block): the open reads past it
        reader.close()
        var bytes = try #require(s.memory.contents(of: path))
        bytes[Int(victim.offset + victim.size / 2)] ^= 0x01
        s.memory.setContents(of: path, to: bytes)

        try await s.reopen()
        #expect(s.store.statistics.recoveryFindings.isEmpty, "the damage is not in what an open reads")
        let results = try await s.db.records(for: names.map { RecordID(recordName: $0) })
        let failed = results.filter { if case .failure(let e) = $0 { e.code == .corruption } else { false } }
        #expect(!failed.isEmpty, "some lookups meet the damaged block and fail, naming it: \(results.compactMap { if case .failure(let e) = $0 { e } else { nil } }.prefix(3))")
        #expect(results.allSatisfy { r in (try? r.get()).map { $0["title"] == .string("t-\($0.recordName)") } ?? true },
                "no lookup answers with another record")
        #expect(s.memory.fileExists(dir + "/" + LSMTree.damagedFileName), "the tree marked itself damaged")
        _ = try? await s.store.close()

        try await s.reopen()
        let findings = s.store.statistics.recoveryFindings
        #expect(findings.count == 1 && findings.first?.contains("found damaged while it was open") == true, "\(findings)")
        #expect(try await titles(s.db, names).count == names.count, "every record is back")
        try await s.store.close()
    }
}
