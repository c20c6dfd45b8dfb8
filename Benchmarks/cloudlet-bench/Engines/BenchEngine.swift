/// A record store the record workloads (`fillsync-concurrent`, `bulkload`) drive: SQLite as the anchor now,
/// Cloudlet's embedded engine as the subject once it compiles (see ``EngineRegistry``).
///
/// Contract, the same for every engine so that the ratio means something:
/// - `open` gets an empty directory, the records the run will save (built from ``RecordGenerator``, indexed by
///   `i`) and how many threads will call `saveOne` at once; open connections, create tables, prepare statements
///   here: it is not timed.
/// - `saveOne(i)` stores record `i` as its own durable commit: when it returns the record survives power loss
///   (fsync or fdatasync done). It is called from up to `writers` threads at the same time.
/// - `saveBatch(range)` stores the records in `range` as one durable, atomic commit; one thread at a time.
/// - Turning a ``GeneratedRecord`` into the engine's own form (binding SQL parameters, building a `Record`) is
///   part of the measured cost.
/// - `close` releases everything; the runner deletes the directory afterwards.
protocol BenchEngine: AnyObject, Sendable {
    func open(dir: String, records: [GeneratedRecord], writers: Int) throws
    func saveOne(_ i: Int) throws
    func saveBatch(_ range: Range<Int>) throws
    func close() throws
}
