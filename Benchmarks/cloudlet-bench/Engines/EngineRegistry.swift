/// What a record engine can do beyond the core of ``BenchEngine`` (which every engine implements). A workload
/// names what it needs; engines without it are not run on it.
///
/// Workloads still to come add their capability and a protocol refining ``BenchEngine``: `query` (records by
/// field predicates, with the same secondary index on every engine), `changefeed` (changes since a token),
/// `compact` (log or LSM compaction under load).
struct EngineCapabilities: OptionSet, Sendable {
    let rawValue: Int
    /// `open`, `saveOne`, `saveBatch`, `close`.
    static let write = EngineCapabilities(rawValue: 1 << 0)
    /// `get`.
    static let read = EngineCapabilities(rawValue: 1 << 1)
    /// `updateBatch`.
    static let update = EngineCapabilities(rawValue: 1 << 2)
    /// `crashImage(to:)` and reopening an existing directory.
    static let recover = EngineCapabilities(rawValue: 1 << 3)
    /// ``ChangefeedEngine/catchUp(pageSize:)``.
    static let changefeed = EngineCapabilities(rawValue: 1 << 4)

    static let core: EngineCapabilities = [.write, .read, .update, .recover]
}

/// The record engines the workloads run on, in the order they run.
///
/// Every workload that takes an engine runs once per entry here that has the capabilities it needs, side by side
/// in the same process run; the table divides the subject's throughput by each anchor's.
enum EngineRegistry {
    struct Entry: Sendable {
        /// Short name for tables, JSON and `--filter` (`sqlite`).
        var name: String
        var role: EngineRole
        /// Version or configuration shown in reports (`SQLite 3.40.1, WAL, synchronous=FULL`).
        var detail: @Sendable () -> String
        /// A new, unopened engine; one per workload run.
        var make: @Sendable () -> any BenchEngine
        var capabilities: EngineCapabilities = .core
        /// The workloads this entry runs (by name); nil: every one it has the capabilities for.
        var only: Set<String>? = nil

        func runs(_ workload: String, needing: EngineCapabilities) -> Bool {
            capabilities.isSuperset(of: needing) && (only?.contains(workload) ?? true)
        }
    }

    static let all: [Entry] = [
        // The subject goes first so it runs first in every round.
        Entry(
            name: "cloudlet", role: .subject, detail: { CloudletEngine.detail }, make: { CloudletEngine() },
            capabilities: [.core, .changefeed]),
        Entry(
            name: "sqlite", role: .anchor, detail: { SQLiteEngine.detail }, make: { SQLiteEngine() },
            capabilities: [.core, .changefeed]),
        // The strongest in-process way to write SQLite from many threads: one connection, writers queue on a
        // lock, no busy-handler sleeps. Only where it differs from `sqlite` (with one writer they are the same).
        Entry(
            name: "sqlite-serial", role: .anchor, detail: { SQLiteEngine.sharedDetail },
            make: { SQLiteEngine(sharedConnection: true) }, only: ["fillsync-concurrent"]),
        Entry(name: "rocksdb", role: .anchor, detail: { RocksDBEngine.detail }, make: { RocksDBEngine() }),
    ]
}
