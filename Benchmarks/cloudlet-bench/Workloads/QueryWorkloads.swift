/// The read workloads, on the data set of ``QueryFixtures`` (loaded once per engine, not timed), one thread,
/// queries/s:
///
/// - `query-eq-sort`: `category = c ORDER BY created DESC LIMIT 100` (equality index, then sort).
/// - `query-eq-sort-composite`: `category = c ORDER BY count DESC LIMIT 100` on a composite (category, count DESC)
///   index (Cloudlet's `INDEX`, SQLite's two-column B-tree index): one range of it.
/// - `query-range`: `count >= lo AND count < lo + w ORDER BY count LIMIT 100`, `w` chosen for ~100 matches.
/// - `query-fulltext`: titles containing two given words, best first by BM25, `LIMIT 100` (Cloudlet's SEARCHABLE
///   index, ranked; SQLite FTS5 `ORDER BY rank`).
/// - `query-near`: records within a radius of a point (about 1,000 of them whatever the size), nearest first,
///   `LIMIT 100` (Cloudlet's spatial index, NEAR sorted by distance; SQLite's R*Tree module: the circle's bounding
///   box, distances computed by the caller).
/// - `query-count`: how many records have `count >= lo AND count < lo + 1000` (~10 % of them), counted without
///   reading records (Cloudlet's count off the ordered index, SQLite's `COUNT(*)` over its index).
/// - `readrandom`: point lookups of whole records by record name, in a scattered order.
final class QueryWorkload: Workload {
    enum Kind: String, CaseIterable {
        case eqSort = "query-eq-sort"
        case eqSortComposite = "query-eq-sort-composite"
        case range = "query-range"
        case fullText = "query-fulltext"
        case near = "query-near"
        case count = "query-count"
        case readRandom = "readrandom"
    }

    /// Records in the data set and operations per run.
    struct Sizes {
        var records: Int
        var queries: Int
        var lookups: Int

        static let full = Sizes(records: 100_000, queries: 500, lookups: 1_000_000)
        static let quick = Sizes(records: 10_000, queries: 300, lookups: 20_000)

        /// The full or quick sizes with `records` records (`--query-records`).
        static func of(quick: Bool, records: Int) -> Sizes {
            var s = quick ? Sizes.quick : Sizes.full
            s.records = records
            return s
        }
    }

    static let summaries: [(name: String, summary: String)] = [
        ("query-eq-sort", "equality + sort + LIMIT 100 on an indexed data set (per engine)"),
        ("query-eq-sort-composite", "equality + sort + LIMIT 100 on a composite index of the two fields (per engine)"),
        ("query-range", "range on an indexed INT64, sorted, LIMIT 100 (per engine)"),
        ("query-fulltext", "two-word full-text search, LIMIT 100; SQLite FTS5 (per engine)"),
        ("query-near", "NEAR a point sorted by distance, LIMIT 100 of ~1,000 within the radius; SQLite R*Tree (per engine)"),
        ("query-count", "count of a range on an indexed INT64 matching ~10% of the records (per engine)"),
        ("readrandom", "point lookups of whole records by name, scattered order (per engine)"),
    ]

    let kind: Kind
    var name: String { kind.rawValue }
    let engine: String
    let role: EngineRole
    let unit: String
    let latencyOf: String
    let sizes: Sizes
    private var fixture: (any QueryFixture)?
    private var names: [String] = []

    init(_ kind: Kind, engine entry: EngineRegistry.Entry, sizes: Sizes) {
        self.kind = kind
        engine = entry.name
        role = entry.role
        self.sizes = sizes
        unit = kind == .readRandom ? "lookups/s" : "queries/s"
        latencyOf = kind == .readRandom ? "one lookup" : kind == .count ? "one count" : "one query (up to 100 rows)"
    }

    /// One workload per read kind and engine that has a fixture.
    static func groups(quick: Bool, records: Int, engines: [EngineRegistry.Entry]) -> [[any Workload]] {
        let sizes = Sizes.of(quick: quick, records: records)
        // `readrandom` is the catalog's own workload (on its reopened store); the query set adds the queries.
        return Kind.allCases.filter { $0 != .readRandom }.map { kind in
            engines.filter { QueryFixtures.engines.contains($0.name) && $0.runs(kind.rawValue, needing: []) }.map {
                QueryWorkload(kind, engine: $0, sizes: sizes) as any Workload
            }
        }
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let root = String(dir[..<(dir.lastIndex(of: "/") ?? dir.endIndex)])
        fixture = try QueryFixtures.fixture(engine: engine, count: sizes.records, root: root)
        if kind == .readRandom && names.isEmpty {
            let g = RecordGenerator()
            names = (0..<sizes.records).map { g.record($0).recordName }
        }
    }

    func run() throws -> RunMeasurement {
        guard let f = fixture else { preconditionFailure("run() without setUp()") }
        let n = kind == .readRandom ? sizes.lookups : sizes.queries
        let words = QueryFixtures.words
        let width = Int64(max(1, 1_000_000 / sizes.records))
        var latencies: [Double] = []
        latencies.reserveCapacity(n)
        var rows = 0
        let clock = Stopwatch()
        let cpu = CPUClock.seconds()
        for i in 0..<n {
            let t = Stopwatch()
            switch kind {
            case .eqSort: rows += try f.eqSort(words[i % words.count])
            case .eqSortComposite: rows += try f.eqSortComposite(words[i % words.count])
            case .range: rows += try f.range(Int64(i * 7919) % (10_000 - width), Int64(i * 7919) % (10_000 - width) + width)
            case .count:
                // A tenth of the values (0 ..< 10,000): ~10 % of the records whatever their number.
                let lo = Int64(i * 7919) % 9_000
                rows += try f.count(lo, lo + 1_000)
            case .fullText:
                let a = words[i % words.count], b = words[(i / words.count + i + 1) % words.count]
                rows += try f.fullText([a, b])
            case .near: rows += try f.near(QueryFixtures.nearCenter(i), km: QueryFixtures.nearRadius(records: sizes.records))
            case .readRandom: rows += try f.lookup(names[(i &* 7_919) % names.count])
            }
            latencies.append(t.elapsed)
        }
        let seconds = clock.elapsed
        // The whole process's CPU (the engine's threads and background work included): on a shared machine, what a
        // query costs is steadier than its latency.
        let cpuPerOperation = (CPUClock.seconds() - cpu) / Double(n)
        if kind == .readRandom && rows != n { throw BenchError(.engine, "\(engine) readrandom found \(rows) of \(n) records") }
        if rows == 0 { throw BenchError(.engine, "\(engine) \(name) returned no rows") }
        let note = String(format: "CPU %.1f µs a %@", cpuPerOperation * 1e6, kind == .count ? "count" : kind == .readRandom ? "lookup" : "query")
        return RunMeasurement(operations: Double(n), seconds: seconds, latencies: latencies, note: note)
    }

    func tearDown() throws { fixture = nil }
}

/// `query-shared`: `query-eq-sort` on the same records (100 k) in a zone shared whole, READ_ONLY, with another user:
/// run by that participant through their shared database (the subject, `cloudlet`) and by the zone's owner through
/// her private database (the anchor, `cloudlet-owner`, the same store, zone and query). What a shared database's
/// checks cost a query (issue 17: "the same speed as the owner's own query").
final class SharedQueryWorkload: Workload {
    let name = "query-shared"
    let engine: String
    let role: EngineRole
    let unit = "queries/s"
    let latencyOf = "one query (up to 100 rows)"
    let asParticipant: Bool
    let sizes: QueryWorkload.Sizes
    private var fixture: CloudletQueryFixture?

    static let summary = (
        name: "query-shared", summary: "query-eq-sort in a zone shared whole: the participant's shared database vs the owner's"
    )

    init(asParticipant: Bool, sizes: QueryWorkload.Sizes) {
        self.asParticipant = asParticipant
        self.sizes = sizes
        engine = asParticipant ? "cloudlet" : "cloudlet-owner"
        role = asParticipant ? .subject : .anchor
    }

    static func group(quick: Bool, records: Int, engines: [EngineRegistry.Entry]) -> [any Workload] {
        guard engines.contains(where: { $0.name == "cloudlet" }) else { return [] }
        let sizes = QueryWorkload.Sizes.of(quick: quick, records: records)
        return [SharedQueryWorkload(asParticipant: true, sizes: sizes), SharedQueryWorkload(asParticipant: false, sizes: sizes)]
    }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        let root = String(dir[..<(dir.lastIndex(of: "/") ?? dir.endIndex)])
        guard let f = try QueryFixtures.fixture(engine: "cloudlet", count: sizes.records, root: root) as? CloudletQueryFixture else {
            throw BenchError(.engine, "query-shared needs Cloudlet's query fixture")
        }
        fixture = f
    }

    func run() throws -> RunMeasurement {
        guard let f = fixture else { preconditionFailure("run() without setUp()") }
        let words = QueryFixtures.words
        var latencies: [Double] = []
        latencies.reserveCapacity(sizes.queries)
        var rows = 0
        let clock = Stopwatch()
        for i in 0..<sizes.queries {
            let t = Stopwatch()
            rows += try f.sharedEqSort(words[i % words.count], asParticipant: asParticipant)
            latencies.append(t.elapsed)
        }
        let seconds = clock.elapsed
        if rows == 0 { throw BenchError(.engine, "\(engine) \(name) returned no rows") }
        return RunMeasurement(operations: Double(sizes.queries), seconds: seconds, latencies: latencies)
    }

    func tearDown() throws { fixture = nil }
}
