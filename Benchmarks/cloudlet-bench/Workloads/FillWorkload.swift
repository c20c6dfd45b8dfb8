/// `fillseq`, `fillrandom`, `fillrandom-sync`: one thread saves `count` new records in atomic batches of
/// `batchSize` (LevelDB's `fillseq` / `fillrandom` with `--batch`); records/s.
///
/// `fillseq` saves names in sorted order, `fillrandom` in random order, both with `os` durability: the engines'
/// write path without the disk's sync latency. `fillrandom-sync` is `fillrandom` with each batch fsync'd: a
/// durable import (it was `bulkload`), the difference to `fillrandom` being what a sync per 200 records costs.
final class FillWorkload: RecordWorkload {
    let count: Int
    let batchSize: Int
    let names: RecordGenerator.NameOrder
    let durability: BenchDurability
    private var data: BenchData?

    init(
        name: String, engine entry: EngineRegistry.Entry, count: Int, batchSize: Int, names: RecordGenerator.NameOrder,
        durability: BenchDurability
    ) {
        self.count = count
        self.batchSize = batchSize
        self.names = names
        self.durability = durability
        super.init(
            name: name, engine: entry,
            latencyOf: "one saveBatch (an atomic commit of \(batchSize) new records, durability \(durability.rawValue))")
    }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let data = fixtures.data(count: count, names: names)
        self.data = data
        opened = try open(dir, data, EngineSettings(durability: durability))
    }

    override func run() throws -> RunMeasurement {
        let engine = engineForRun
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
}
