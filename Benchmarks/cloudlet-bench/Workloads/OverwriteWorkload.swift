/// `overwrite`: one thread replaces every field of `count` existing records of a preloaded store (each record
/// once, in random order) in atomic batches of `batchSize`, durability `os` (LevelDB's `overwrite`); records/s.
final class OverwriteWorkload: RecordWorkload {
    let storeCount: Int
    let batchSize: Int
    let indexes: [Int]

    init(name: String, engine entry: EngineRegistry.Entry, storeCount: Int, count: Int, batchSize: Int) {
        self.storeCount = storeCount
        self.batchSize = batchSize
        indexes = KeyDistribution.permutation.indexes(count, of: storeCount, seed: 0x0FE5_0001)
        super.init(
            name: name, engine: entry,
            latencyOf: "one updateBatch (an atomic commit replacing \(batchSize) existing records, durability os)")
    }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let store = try fixtures.store(entry, count: storeCount)
        try Fixtures.copyContents(of: store.clean, into: dir)
        opened = try open(dir, store.data, EngineSettings(durability: .os))
    }

    override func run() throws -> RunMeasurement {
        let engine = engineForRun
        var latencies: [Double] = []
        latencies.reserveCapacity(indexes.count / batchSize + 1)
        let clock = Stopwatch()
        for start in stride(from: 0, to: indexes.count, by: batchSize) {
            let t = Stopwatch()
            try engine.updateBatch(indexes[start..<min(start + batchSize, indexes.count)])
            latencies.append(t.elapsed)
        }
        return RunMeasurement(operations: Double(indexes.count), seconds: clock.elapsed, latencies: latencies)
    }
}
