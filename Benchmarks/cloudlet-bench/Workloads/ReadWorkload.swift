/// `readrandom` and `readhot`: point lookups by record name in a preloaded store (closed cleanly, then reopened:
/// nothing in the engines' own caches, the files in the OS page cache), one thread; reads/s.
///
/// `readrandom` picks records uniformly (LevelDB's `readrandom`), `readhot` Zipfian with s = 0.99 (YCSB's hot
/// set), so it also measures the engines' caches. Every read turns the stored record into the app's form and
/// checks a field.
final class ReadWorkload: RecordWorkload {
    let storeCount: Int
    let indexes: [Int]
    let distribution: KeyDistribution
    private var store: Fixtures.Store?

    init(name: String, engine entry: EngineRegistry.Entry, storeCount: Int, reads: Int, distribution: KeyDistribution) {
        self.storeCount = storeCount
        self.distribution = distribution
        // The same sequence on every engine and every run.
        indexes = distribution.indexes(reads, of: storeCount, seed: 0x5EED_0000 + UInt64(name.utf8.count))
        super.init(
            name: name, engine: entry, unit: "reads/s",
            latencyOf: "one get by record name (\(distribution.label) over \(storeCount) records), decoded")
    }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let store = try fixtures.store(entry, count: storeCount)
        self.store = store
        try Fixtures.copyContents(of: store.clean, into: dir)
        opened = try open(dir, store.data, EngineSettings(durability: .os))
    }

    override func run() throws -> RunMeasurement {
        let engine = engineForRun
        let clock = Stopwatch()
        let latencies = try engine.getEach(indexes[...])
        return RunMeasurement(operations: Double(indexes.count), seconds: clock.elapsed, latencies: latencies)
    }
}
