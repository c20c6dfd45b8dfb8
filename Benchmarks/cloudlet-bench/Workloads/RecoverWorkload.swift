/// `recover-checkpoint` and `recover-crash`: how long opening a preloaded store takes, shown as seconds per
/// million records (open + one point read, timed together: SQLite opens lazily, its first query does the work).
///
/// - `recover-checkpoint`: the store as a clean `close` left it. Cloudlet reads its index's manifest and flushed
///   state and replays nothing; SQLite's WAL was checkpointed into the database; RocksDB's memtable was flushed.
/// - `recover-crash`: the crash image taken while the store was open (``BenchEngine/crashImage(to:)``).
///   Cloudlet replays the log written since its index's last flush (at most a memtable's worth, 32 MiB of index
///   entries or 64 MiB of log); SQLite rebuilds its WAL index from the WAL (at most ~1,000 pages: it checkpoints
///   as it goes); RocksDB replays its WAL into a memtable and flushes it.
///
/// The files are in the OS page cache (they were just copied): this is the CPU side of recovery, not cold reads.
final class RecoverWorkload: RecordWorkload {
    let storeCount: Int
    let crash: Bool
    private var store: Fixtures.Store?
    private var dir = ""

    init(name: String, engine entry: EngineRegistry.Entry, storeCount: Int, crash: Bool) {
        self.storeCount = storeCount
        self.crash = crash
        super.init(
            name: name, engine: entry,
            latencyOf: "one open of \(storeCount) records "
                + (crash ? "from a crash image (log replay)" : "after a clean close") + " plus one get")
    }

    override var metric: Metric { .secondsPerMillion }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let store = try fixtures.store(entry, count: storeCount)
        self.store = store
        self.dir = dir
        try Fixtures.copyContents(of: crash ? store.crash : store.clean, into: dir)
    }

    override func run() throws -> RunMeasurement {
        guard let store else { preconditionFailure("\(name): run() without setUp()") }
        let clock = Stopwatch()
        let engine = entry.make()
        try engine.open(dir: dir, data: store.data, settings: EngineSettings(durability: .os))
        opened = engine
        try engine.get(storeCount - 1)
        let seconds = clock.elapsed
        var note: String?
        if let frames = engine.framesReplayedOnOpen {
            // Check that the image is what this workload claims to measure.
            guard crash ? frames > 0 : frames == 0 else {
                throw BenchError(.engine, "\(name) on \(self.engine): \(frames) log frames replayed on open")
            }
            note = "\(frames) log frames replayed"
        }
        return RunMeasurement(operations: Double(storeCount), seconds: seconds, latencies: [seconds], note: note)
    }
}
