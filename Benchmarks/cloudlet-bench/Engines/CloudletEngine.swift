import Cloudlet
import CloudletCore
import Dispatch
import Synchronization

/// The subject: Cloudlet's embedded engine through its public async API, with `fsync` durability (each save
/// returns after its group's fdatasync) and records in a custom zone of one private database, so a batch is one
/// atomic commit.
final class CloudletEngine: BenchEngine {
    static var detail: String { "Cloudlet embedded, durability fsync, group commit, 1 partition" }

    private struct State {
        var store: CloudletStore?
        var db: Database?
        var records: [GeneratedRecord] = []
    }

    private let state = Mutex(State())
    private let zone = ZoneID(zoneName: "Bench")

    func open(dir: String, records: [GeneratedRecord], writers: Int) throws {
        let zone = self.zone
        let (store, db) = try Self.wait {
            let store = try await CloudletStore.open(at: dir + "/cloudlet", configuration: StoreConfiguration(durability: .fsync))
            let db = try store.container("iCloud.com.example.bench").privateDatabase(user: "bench")
            try await db.createZone(zone)
            return (store, db)
        }
        state.withLock {
            $0.store = store
            $0.db = db
            $0.records = records
        }
    }

    private func record(_ g: GeneratedRecord) -> Record {
        Record(
            recordType: g.recordType, recordName: g.recordName, zoneID: zone,
            fields: [
                "title": .string(g.title), "count": .int64(g.count), "score": .double(g.score),
                "created": .timestamp(g.created), "tags": .list(.string, g.tags.map { .string($0) }),
                "payload": .bytes(g.payload),
            ])
    }

    func saveOne(_ i: Int) throws {
        let (db, g) = state.withLock { ($0.db!, $0.records[i]) }
        let r = record(g)
        _ = try Self.wait { try await db.save(r) }
    }

    func saveBatch(_ range: Range<Int>) throws {
        let (db, gs) = state.withLock { ($0.db!, Array($0.records[range])) }
        let ops = gs.map { RecordOperation.create(record($0)) }
        let results = try Self.wait { try await db.modify(ops, atomic: true) }
        if let failure = results.first(where: { $0.error != nil }) {
            throw failure.error!
        }
    }

    func close() throws {
        let store = state.withLock { s -> CloudletStore? in
            defer { s = State() }
            return s.store
        }
        try store?.closeNow()
    }

    /// Runs async work from a benchmark thread (never a cooperative-pool thread) and waits for it.
    private static func wait<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let box = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            box.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try box.withLock { $0! }.get()
    }
}
