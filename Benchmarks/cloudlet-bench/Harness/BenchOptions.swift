import CloudletCommandLine

/// The command line, parsed by CloudletCommandLine as cloudlet's and cloudlet-tool's are.
struct BenchOptions: Equatable {
    var quick = false
    var json = false
    var help = false
    var list = false
    /// Terms from every `--filter`, comma-separated lists split.
    var filters: [String] = []
    /// Engines from every `--engine`: when set, only these engines' rows run (after `--filter`).
    var engines: [String] = []
    /// Measured runs per workload; nil: 5, or 3 with `--quick`.
    var runs: Int?
    var dir: String?
    /// `--scale-records` and `--scale-reads`: nil for the sizes of `--quick` or the full run.
    var scaleRecords: Int?
    var scaleReads: Int?
    /// `--query-records`: nil for the query rows' full (100,000) or `--quick` (10,000) data set.
    var queryRecords: Int?

    var measuredRuns: Int { runs ?? (quick ? 3 : 5) }

    /// The workloads' sizes: the full or `--quick` ones, with `--scale-records` and `--scale-reads` applied.
    var sizes: WorkloadCatalog.Sizes {
        var s = quick ? WorkloadCatalog.Sizes.quick : .full
        if let scaleRecords { s.scaleRecords = scaleRecords }
        if let scaleReads { s.scaleReads = scaleReads }
        if let queryRecords { s.queryRecords = queryRecords }
        return s
    }

    static let usage = """
        USAGE: cloudlet-bench [--quick] [--json] [--filter NAME]... [--engine NAME]... [--runs N] [--dir PATH]
                              [--scale-records N] [--scale-reads N] [--query-records N]

        Runs Cloudlet's benchmarks side by side with their anchors (the bare disk, SQLite, RocksDB) in one
        process and prints median throughput, p50/p99 latency and the ratio Cloudlet / anchor. Build with
        -c release: a debug build says so loudly and its numbers mean nothing.

        OPTIONS:
          --quick          Smaller workloads and 3 runs: a smoke test, not a measurement.
          --json           Print the results as JSON (machine, engines, one object per result).
          --filter NAME    Run only workloads whose name contains NAME, or whose engine is NAME.
                           Repeatable; commas separate names; the union runs. fillsync* keep
                           their disk rows (their limit).
          --engine NAME    Of those, run only this engine's rows (disk, disk-prewritten, cloudlet,
                           sqlite, sqlite-serial, rocksdb). Repeatable; commas separate names.
                           To profile one engine: --filter readrandom --engine cloudlet.
          --runs N         Measured runs per workload after one warm-up run (default 5, 3 with --quick);
                           scale runs once, without a warm-up.
          --dir PATH       Where to put data files (kept). Default: a new directory under $TMPDIR,
                           removed at exit. Benchmarks measure the filesystem this is on.
          --scale-records N
                           Records scale loads per engine (default 10,000,000; 50,000 with --quick).
          --scale-reads N  Random reads scale does in the reopened store (default 1,000,000; 20,000
                           with --quick). For scale alone: --filter scale.
          --query-records N
                           Records in the data set of the query-* rows and query-shared (default
                           100,000; 10,000 with --quick). Issue 13's second size: --query-records 1000000.
          --list           List the workloads and engines, then exit.
          -h, --help       Show this help.

        WORKLOADS:
        \(WorkloadCatalog.listing(indent: "  "))

        EXIT STATUS: 0 success, 64 usage error, 74 I/O error, 1 engine error.
        """

    /// Parses `arguments` (without the program name). Throws ``BenchError`` with code `.usage`.
    static func parse(_ arguments: [String]) throws -> BenchOptions {
        let c: CommandLineOptions
        do {
            c = try CommandLineOptions(
                parsing: arguments, valued: ["--filter", "--engine", "--runs", "--dir", "--scale-records", "--scale-reads",
                    "--query-records"],
                flags: ["--quick", "--json", "--list"])
        } catch {
            throw BenchError(.usage, "\(error.message) (see --help)")
        }
        var o = BenchOptions()
        if c.helpRequested {
            o.help = true
            return o
        }
        o.quick = c.has("--quick")
        o.json = c.has("--json")
        o.list = c.has("--list")
        o.filters = try terms(c, "--filter")
        o.engines = try terms(c, "--engine")
        do {
            o.runs = try c.integer("--runs", in: 1...Int.max, "a whole number")
            o.scaleRecords = try c.integer("--scale-records", in: 1...Int.max, "a whole number")
            o.scaleReads = try c.integer("--scale-reads", in: 1...Int.max, "a whole number")
            o.queryRecords = try c.integer("--query-records", in: 1...Int.max, "a whole number")
        } catch {
            throw BenchError(.usage, error.message)
        }
        if let path = c["--dir"] {
            guard !path.isEmpty else { throw BenchError(.usage, "--dir needs a path") }
            o.dir = path
        }
        return o
    }

    /// The names of every `name` option, comma-separated lists split; each option must name something.
    private static func terms(_ c: CommandLineOptions, _ name: String) throws -> [String] {
        try c.values(name).flatMap { value in
            let terms = value.split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
            guard !terms.isEmpty else { throw BenchError(.usage, "\(name) needs a name") }
            return terms
        }
    }

    /// The groups whose workloads match the filters (all when there are none), restricted to `--engine`'s
    /// engines. Throws a usage error for a filter term or engine that matches nothing, listing what exists.
    func select(_ groups: [[any Workload]]) throws -> [[any Workload]] {
        let all = groups.flatMap { $0 }
        let names = Set(all.map(\.name) + all.map(\.engine)).sorted().joined(separator: ", ")
        for engine in engines where !all.contains(where: { $0.engine == engine }) {
            let engineNames = Set(all.map(\.engine)).sorted().joined(separator: ", ")
            throw BenchError(.usage, "--engine '\(engine)' is not an engine; there are: \(engineNames)")
        }
        func matches(_ w: any Workload, _ term: String) -> Bool { w.name.contains(term) || w.engine == term }
        for term in filters where !all.contains(where: { matches($0, term) }) {
            throw BenchError(.usage, "--filter '\(term)' matches no workload or engine; there are: \(names)")
        }
        return groups.map { group in
            var kept = filters.isEmpty ? group : group.filter { w in filters.contains { matches(w, $0) } }
            // The disk row of fillsync* stays with any engine of its group that runs (unless --engine drops it).
            if kept.contains(where: { !$0.accompaniesGroup }) {
                kept = group.filter { w in w.accompaniesGroup || kept.contains { $0 === w } }
            }
            return engines.isEmpty ? kept : kept.filter { engines.contains($0.engine) }
        }.filter { !$0.isEmpty }
    }
}
