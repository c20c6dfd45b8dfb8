/// `fillsync-concurrent`: `writers` threads each save their share of `count` small records, every save its own
/// durable commit (LevelDB's `fillsync`, with concurrency). Engines that batch concurrent commits into one
/// sync (group commit) beat one sync per record here; records/s.
final class FillSyncConcurrentWorkload: Workload {
    let name = "fillsync-concurrent"
    let engine: String
    let role: EngineRole
    let unit = "records/s"
    let latencyOf = "one saveOne (a durable commit of one record), including waiting for other writers"

    let count: Int
    let writers: Int
    private let entry: EngineRegistry.Entry
    private var opened: (any BenchEngine)?

    init(engine entry: EngineRegistry.Entry, count: Int, writers: Int) {
        self.entry = entry
        engine = entry.name
        role = entry.role
        self.count = count
        self.writers = writers
    }

    func setUp(in dir: String) throws {
        let e = entry.make()
        try e.open(dir: dir, records: RecordGenerator().records(count), writers: writers)
        opened = e
    }

    func run() throws -> RunMeasurement {
        guard let engine = opened else { preconditionFailure("run() without setUp()") }
        let (count, writers) = (self.count, self.writers)
        let (seconds, perWorker) = try WorkerThreads.run(count: writers) { worker in
            var latencies: [Double] = []
            latencies.reserveCapacity(count / writers + 1)
            for i in stride(from: worker, to: count, by: writers) {
                let t = Stopwatch()
                try engine.saveOne(i)
                latencies.append(t.elapsed)
            }
            return latencies
        }
        return RunMeasurement(operations: Double(count), seconds: seconds, latencies: perWorker.flatMap { $0 })
    }

    func tearDown() throws {
        let e = opened
        opened = nil
        try e?.close()
    }
}
