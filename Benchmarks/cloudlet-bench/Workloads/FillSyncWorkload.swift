/// `fillsync` and `fillsync-concurrent`: `writers` threads each save their share of `count` new records, every
/// save its own fsync'd commit (LevelDB's `fillsync`; concurrently with 32 writers); records/s.
///
/// With one writer no engine can beat one commit per disk sync (`disk-append-sync`); with many, engines that put
/// concurrent commits into one sync (group commit: Cloudlet's committer, RocksDB's write group, not SQLite) can.
/// The table shows the throughput as a fraction of `disk-append-sync` too.
final class FillSyncWorkload: RecordWorkload {
    let count: Int
    let writers: Int
    private var data: BenchData?

    init(name: String, engine entry: EngineRegistry.Entry, count: Int, writers: Int) {
        self.count = count
        self.writers = writers
        super.init(
            name: name, engine: entry,
            latencyOf: "one saveOne (a durable commit of one record)"
                + (writers > 1 ? ", including waiting for other writers" : ""))
    }

    override var comparesToSyncLimit: Bool { true }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let data = fixtures.data(count: count, names: .random)
        self.data = data
        opened = try open(dir, data, EngineSettings(durability: .fsync, writers: writers))
    }

    override func run() throws -> RunMeasurement {
        let engine = engineForRun
        let (count, writers) = (self.count, self.writers)
        if writers == 1 {
            let clock = Stopwatch()
            let latencies = try engine.saveEach(stride(from: 0, to: count, by: 1))
            return RunMeasurement(operations: Double(count), seconds: clock.elapsed, latencies: latencies)
        }
        let (seconds, perWorker) = try WorkerThreads.run(count: writers) { worker in
            try engine.saveEach(stride(from: worker, to: count, by: writers))
        }
        return RunMeasurement(operations: Double(count), seconds: seconds, latencies: perWorker.flatMap { $0 })
    }
}
