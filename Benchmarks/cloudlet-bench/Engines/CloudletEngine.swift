import Cloudlet
import CloudletConcurrency
import CloudletCore
import Dispatch
import Foundation
import Synchronization

/// The subject: Cloudlet's embedded engine through its public async API, with `fsync` or `os` durability (an
/// `fsync` save returns after its group's fdatasync) and records in a custom zone of one private database, so a
/// batch is one atomic commit. Updates are `forceReplace` (CloudKit's `allKeys` save policy: replace the whole
/// record whatever its change tag, the analogue of a key-value put or an SQL `UPDATE` of every column).
///
/// Calls come from bench threads and wait for a task; the loops (`saveEach`, `getEach`) run in one task each, as
/// an async caller would, so the bridge is paid per loop and not per operation.
final class CloudletEngine: BenchEngine {
    static var detail: String {
        "Cloudlet embedded, durability fsync/os, group commit, 1 partition, one custom zone, forceReplace updates"
    }

    private struct State {
        var store: CloudletStore?
        var db: Database?
        var data: BenchData?
        var path = ""
    }

    private let state = Mutex(State())
    private let zone = ZoneID(zoneName: "Bench")
    static let directoryName = "cloudlet"

    func open(dir: String, data: BenchData, settings: EngineSettings) throws {
        let zone = self.zone
        let path = dir + "/" + Self.directoryName
        let configuration = StoreConfiguration(durability: settings.durability == .fsync ? .fsync : .os)
        let (store, db) = try ThreadBridge.wait {
            let store = try await CloudletStore.open(at: path, configuration: configuration)
            let db = try store.container("iCloud.com.example.bench").privateDatabase(user: "bench")
            try await db.createZone(zone)  // no commit when it exists (a reopen)
            return (store, db)
        }
        state.withLock {
            $0.store = store
            $0.db = db
            $0.data = data
            $0.path = path
        }
    }

    private func opened() -> (Database, BenchData) {
        state.withLock { s in
            guard let db = s.db, let data = s.data else { preconditionFailure("CloudletEngine used before open()") }
            return (db, data)
        }
    }

    private func record(_ g: GeneratedRecord) -> Record { Self.record(g, zone) }

    func saveOne(_ i: Int) throws {
        let (db, data) = opened()
        let r = record(data.records[i])
        _ = try ThreadBridge.wait { try await db.save(r) }
    }

    func saveEach(_ indices: StrideTo<Int>) throws -> [Double] {
        let (db, data) = opened()
        let zone = self.zone
        return try ThreadBridge.wait {
            try await Stopwatch.timeEach(indices) { _ = try await db.save(Self.record(data.records[$0], zone)) }
        }
    }

    func saveBatch(_ range: Range<Int>) throws { try saveRecords(opened().1.records[range]) }

    func saveRecords(_ batch: ArraySlice<GeneratedRecord>) throws {
        let db = opened().0
        let ops = batch.map { RecordOperation.create(record($0)) }
        try Self.check(try ThreadBridge.wait { try await db.modify(ops, atomic: true) })
    }

    func updateBatch(_ indices: ArraySlice<Int>) throws {
        let (db, data) = opened()
        let ops = indices.map { RecordOperation.forceReplace(record(data.updates[$0])) }
        try Self.check(try ThreadBridge.wait { try await db.modify(ops, atomic: true) })
    }

    func get(_ i: Int) throws { try read(opened().1.records[i]) }

    func read(_ expected: GeneratedRecord) throws {
        let db = opened().0
        let zone = self.zone
        try ThreadBridge.wait { try await Self.get(db, zone, expected) }
    }

    func getEach(_ indices: ArraySlice<Int>) throws -> [Double] {
        let (db, data) = opened()
        let zone = self.zone
        return try ThreadBridge.wait { try await Stopwatch.timeEach(indices) { try await Self.get(db, zone, data.records[$0]) } }
    }

    func readEach(_ expected: ArraySlice<GeneratedRecord>) throws -> [Double] {
        let db = opened().0
        let zone = self.zone
        return try ThreadBridge.wait { try await Stopwatch.timeEach(expected) { try await Self.get(db, zone, $0) } }
    }

    var cacheDescription: String {
        "record cache \(TablePrinter.number(Double(StoreConfiguration().recordCacheSize))) decoded records (default)"
    }

    private static func get(_ db: Database, _ zone: ZoneID, _ expected: GeneratedRecord) async throws {
        let r = try await db.record(for: RecordID(recordName: expected.recordName, zoneID: zone))
        guard r["count"] == .int64(expected.count) else {
            throw BenchError(
                .engine, "Cloudlet: '\(expected.recordName)' has count \(String(describing: r["count"])), expected \(expected.count)")
        }
    }

    /// Copies the open store's directory and deletes the checkpoints and the lock file in the copy, as
    /// `StoreRecoveryTests.crashImage` does: opening the copy replays the whole log.
    ///
    /// Every save has returned, so every commit is written to the OS. `checkpoint()` first is the public API's
    /// flush: it waits until everything is durable and, taking the checkpoint writer's lock, until a background
    /// checkpoint (one starts every 64 MiB of log) has finished, so no checkpoint file changes during the copy.
    func crashImage(to dir: String) throws {
        let (path, store) = state.withLock { ($0.path, $0.store) }
        guard let store else { preconditionFailure("CloudletEngine.crashImage before open()") }
        // The files as a crash would leave them: the log and the index as of its last flush, whose memtable (what
        // was written since) is lost and replayed from the log. No merge may be writing files while they are copied.
        try ThreadBridge.wait { try await store.finishIndexMerges() }
        let image = dir + "/" + Self.directoryName
        let fm = FileManager.default
        try fm.copyItem(atPath: path, toPath: image)
        guard let files = fm.enumerator(atPath: image) else { throw BenchError.io("opendir", image) }
        for case let file as String in files where file.hasSuffix(".tmp") || file == "LOCK" {
            try fm.removeItem(atPath: image + "/" + file)
        }
    }

    var framesReplayedOnOpen: Int? {
        state.withLock { $0.store?.statistics.framesReplayed }
    }

    func close() throws {
        let store = state.withLock { s -> CloudletStore? in
            defer { s = State() }
            return s.store
        }
        if let store { try ThreadBridge.wait { try await store.close() } }
    }

    /// The record as an app would build it: its type and name in the bench zone, six typed fields.
    private static func record(_ g: GeneratedRecord, _ zone: ZoneID) -> Record {
        Record(
            recordType: g.recordType, recordName: g.recordName, zoneID: zone,
            fields: [
                "title": .string(g.title), "count": .int64(g.count), "score": .double(g.score),
                "created": .timestamp(g.created), "tags": .list(.string, g.tags.map { .string($0) }),
                "payload": .bytes(g.payload),
            ])
    }

    private static func check(_ results: [RecordResult]) throws {
        if let failure = results.first(where: { $0.error != nil }) { throw failure.error! }
    }

    /// The opened database (for extensions in other files).
    func openedDatabase() -> Database { opened().0 }

}

extension CloudletEngine: ChangefeedEngine {
    func catchUp(pageSize: Int) throws -> (count: Int, latencies: [Double]) {
        let db = openedDatabase()
        let zone = ZoneID(zoneName: "Bench")
        return try ThreadBridge.wait {
            var token: ChangeToken?
            var count = 0
            var latencies: [Double] = []
            while true {
                let clock = Stopwatch()
                let page = try await db.zoneChanges(zone, since: token, resultsLimit: pageSize)
                for case .changed(let r) in page.changes where r["count"]?.int64Value != nil { count += 1 }
                latencies.append(clock.elapsed)
                token = page.token
                if !page.moreComing { return (count, latencies) }
            }
        }
    }
}
