/// `bulkload`: one thread saves `count` records in durable transactions of `batchSize`; records/s. What an
/// import or a sync from another device does.
final class BulkLoadWorkload: Workload {
    let name = "bulkload"
    let engine: String
    let role: EngineRole
    let unit = "records/s"
    let latencyOf: String

    let count: Int
    let batchSize: Int
    private let entry: EngineRegistry.Entry
    private var opened: (any BenchEngine)?

    init(engine entry: EngineRegistry.Entry, count: Int, batchSize: Int) {
        self.entry = entry
        engine = entry.name
        role = entry.role
        self.count = count
        self.batchSize = batchSize
        latencyOf = "one saveBatch (a durable commit of \(batchSize) records)"
    }

    func setUp(in dir: String) throws {
        let e = entry.make()
        try e.open(dir: dir, records: RecordGenerator().records(count), writers: 1)
        opened = e
    }

    func run() throws -> RunMeasurement {
        guard let engine = opened else { preconditionFailure("run() without setUp()") }
        var latencies: [Double] = []
        latencies.reserveCapacity(count / batchSize + 1)
        let clock = Stopwatch()
        for start in stride(from: 0, to: count, by: batchSize) {
            let t = Stopwatch()
            try engine.saveBatch(start..<min(start + batchSize, count))
            latencies.append(t.elapsed)
        }
        return RunMeasurement(operations: Double(count), seconds: clock.elapsed, latencies: latencies)
    }

    func tearDown() throws {
        let e = opened
        opened = nil
        try e?.close()
    }
}
