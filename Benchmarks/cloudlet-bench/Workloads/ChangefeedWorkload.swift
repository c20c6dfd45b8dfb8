/// `changefeed`: a client catching up from token zero on every change of a preloaded store (reopened: nothing in
/// the engines' caches), in pages of 200, turning each record into the app's form; records/s.
///
/// Cloudlet reads its zone change feed (`Database.zoneChanges`, each record at its latest version in commit order,
/// with a new token per page). The anchor is what an app would do with SQLite: keyset pagination over the rowid
/// (`WHERE rowid > ? ORDER BY rowid LIMIT 200`), which is commit order for a freshly loaded table.
final class ChangefeedWorkload: RecordWorkload {
    let storeCount: Int
    static let pageSize = 200
    private var store: Fixtures.Store?

    init(engine entry: EngineRegistry.Entry, storeCount: Int) {
        self.storeCount = storeCount
        super.init(
            name: "changefeed", engine: entry, unit: "records/s",
            latencyOf: "one page of \(Self.pageSize) changes, decoded")
    }

    override func setUp(in dir: String, fixtures: Fixtures) throws {
        let store = try fixtures.store(entry, count: storeCount)
        self.store = store
        try Fixtures.copyContents(of: store.clean, into: dir)
        opened = try open(dir, store.data, EngineSettings(durability: .os))
    }

    override func run() throws -> RunMeasurement {
        guard let engine = engineForRun as? any ChangefeedEngine else {
            throw BenchError(.engine, "\(entry.name) has no change feed")
        }
        let clock = Stopwatch()
        let (count, latencies) = try engine.catchUp(pageSize: Self.pageSize)
        guard count == storeCount else {
            throw BenchError(.engine, "\(entry.name): the change feed returned \(count) records of \(storeCount)")
        }
        return RunMeasurement(operations: Double(count), seconds: clock.elapsed, latencies: latencies)
    }
}

/// An engine that can list every change since the start, page by page.
protocol ChangefeedEngine: BenchEngine {
    /// Reads every record from the start in pages of `pageSize`; returns the count and each page's latency (s).
    func catchUp(pageSize: Int) throws -> (count: Int, latencies: [Double])
}
