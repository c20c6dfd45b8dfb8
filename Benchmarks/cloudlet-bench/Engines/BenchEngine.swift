/// A record store the record workloads drive: Cloudlet's embedded engine (the subject), SQLite and RocksDB (the
/// anchors). Every engine gets the same records, the same durability and the same one index (by record name).
///
/// Contract, the same for every engine so that the ratios mean something:
/// - `open` gets a directory (empty, or holding what an earlier `open` of the same engine type left there: that
///   is a reopen, and recovers), the data set the run uses and the settings. Opening, creating tables and
///   preparing statements happen here. It is not timed, except by the `recover-*` workloads, which time
///   `open` plus one `get`.
/// - `saveOne(i)` stores `data.records[i]` as its own commit; `saveBatch(range)` stores `data.records[range]` as
///   one atomic commit. Both return once the commit is as durable as `settings.durability` says. `saveOne` may be
///   called from up to `settings.writers` threads at once; everything else from one thread at a time.
/// - `updateBatch(indices)` replaces the fields of existing records `indices` with `data.updates[i]` (same name,
///   type and field names, new values), as one atomic commit.
/// - `get(i)` reads record `i` by its name and turns it into what an app holds (Cloudlet: a `Record`; SQLite and
///   RocksDB: a ``GeneratedRecord`` decoded from the row or value); it throws if the record is missing or its
///   `count` is not `data.records[i].count`.
/// - `crashImage(to:)` copies the engine's files, while it is open and idle, into an empty directory as a crash
///   at this moment would leave them: opening the copy must replay the engine's log (Cloudlet: no checkpoint;
///   SQLite: the WAL; RocksDB: the WAL, memtable not flushed).
/// - Turning a ``GeneratedRecord`` into the engine's own form (binding SQL parameters, building a `Record`,
///   serializing a value) and back is part of the measured cost.
/// - `close` releases everything cleanly (Cloudlet writes a checkpoint, SQLite checkpoints its WAL, RocksDB
///   flushes its memtable); the runner deletes the directory afterwards.
///
/// Workloads that come later (query, changefeed, compact) add their own protocols refining this one, and a
/// capability in ``EngineCapabilities``, so that engines without them are simply not run on them.
protocol BenchEngine: AnyObject, Sendable {
    func open(dir: String, data: BenchData, settings: EngineSettings) throws
    func saveOne(_ i: Int) throws
    func saveBatch(_ range: Range<Int>) throws
    func updateBatch(_ indices: ArraySlice<Int>) throws
    func get(_ i: Int) throws
    func crashImage(to dir: String) throws
    func close() throws

    /// Stores `batch` as one atomic commit, as `saveBatch` does, but records the engine's data set need not hold:
    /// `scale` generates its records batch by batch, so that millions of them never sit in the process's memory.
    func saveRecords(_ batch: ArraySlice<GeneratedRecord>) throws
    /// Reads the record named `expected.recordName` and checks it, as `get` does (for records not in the data set).
    func read(_ expected: GeneratedRecord) throws
    /// The cache this engine was opened with, for reports (`page cache 8 MiB`).
    var cacheDescription: String { get }

    /// `saveOne` for each index in turn, returning each one's latency in seconds. Engines whose API is async
    /// override it to run the whole loop in one task, so that the bench thread's bridge is not counted per call.
    func saveEach(_ indices: StrideTo<Int>) throws -> [Double]
    /// `get` for each index in turn, returning each one's latency in seconds (see ``saveEach(_:)``).
    func getEach(_ indices: ArraySlice<Int>) throws -> [Double]
    /// `read` for each record in turn, returning each one's latency in seconds (see ``saveEach(_:)``).
    func readEach(_ expected: ArraySlice<GeneratedRecord>) throws -> [Double]
    /// Log frames the last `open` replayed, when the engine reports it (Cloudlet: `framesReplayed`); the
    /// `recover-*` workloads check it so that they measure what they claim.
    var framesReplayedOnOpen: Int? { get }
}

extension BenchEngine {
    func saveEach(_ indices: StrideTo<Int>) throws -> [Double] { try Stopwatch.timeEach(indices) { try saveOne($0) } }

    func getEach(_ indices: ArraySlice<Int>) throws -> [Double] { try Stopwatch.timeEach(indices) { try get($0) } }

    func readEach(_ expected: ArraySlice<GeneratedRecord>) throws -> [Double] {
        try Stopwatch.timeEach(expected) { try read($0) }
    }

    var framesReplayedOnOpen: Int? { nil }
}

/// When a commit is acknowledged; each engine maps it onto its own setting.
enum BenchDurability: String, Sendable, Codable {
    /// Survives power loss: Cloudlet `.fsync` (group commit, fdatasync), SQLite WAL `synchronous=FULL`, RocksDB
    /// `WriteOptions.sync = true`.
    case fsync
    /// Written to the OS, survives a process crash: Cloudlet `.os`, SQLite WAL `synchronous=NORMAL`, RocksDB
    /// `sync = false` (WAL written, not synced).
    case os
}

/// How a workload opens an engine.
struct EngineSettings: Sendable {
    var durability: BenchDurability
    /// Threads that may call `saveOne` at the same time.
    var writers: Int = 1
    /// SQLite's page cache and RocksDB's block cache, in bytes; nil: the engine's default (SQLite 2 MB, RocksDB
    /// 8 MiB). Cloudlet's record cache counts decoded records, not bytes, and keeps its default (10,000).
    var cacheBytes: Int? = nil
}

/// The records of one run, shared read-only by the workload and the engine.
final class BenchData: Sendable {
    let records: [GeneratedRecord]
    /// `updates[i]`: record `i` with new field values (empty unless asked for).
    let updates: [GeneratedRecord]

    /// No records: for engines that are given theirs with `saveRecords` and `read` (`scale`).
    static let none = BenchData(count: 0, names: .random)

    init(count: Int, names: RecordGenerator.NameOrder, withUpdates: Bool = false) {
        let generator = RecordGenerator(names: names)
        records = generator.records(count)
        updates = withUpdates ? (0..<count).map { generator.updated($0) } : []
    }

    var count: Int { records.count }
}
