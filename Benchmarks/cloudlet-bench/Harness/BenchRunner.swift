/// Runs workload groups: for each group, one warm-up run per engine, then the measured runs with the engines
/// interleaved (run 1 of every engine, then run 2…), so that drift on a shared machine hits them all alike. A
/// ``Workload/singleRun`` workload gets no warm-up and one run.
struct BenchRunner {
    let directory: BenchDirectory
    /// Measured runs per workload (after the warm-up).
    let runs: Int

    func run(_ groups: [[any Workload]]) throws -> [BenchResult] {
        let fixtures = Fixtures(root: directory.path + "/fixtures")
        defer {
            fixtures.removeAll()
            // Before the directory goes (main's cleanup): a store still open under it would find its files gone
            // mid-flush and report that as a failed background flush.
            QueryFixtures.closeAll()
        }
        var results: [BenchResult] = []
        for (g, group) in groups.enumerated() {
            let label = "[\(g + 1)/\(groups.count)] \(group[0].name)"
            if !Console.stderrIsTerminal {
                Console.error("running \(group[0].name) (\(group.map(\.engine).joined(separator: ", ")))")
            }
            for w in group where !w.singleRun {
                Console.progress("\(label) · \(w.engine) · warm-up")
                _ = try runOnce(w, tag: "warmup", fixtures)
            }
            var measured = [[RunMeasurement]](repeating: [], count: group.count)
            for r in 0..<runs {
                for (k, w) in group.enumerated() where r == 0 || !w.singleRun {
                    Console.progress("\(label) · \(w.engine) · run \(r + 1)/\(w.singleRun ? 1 : runs)")
                    measured[k].append(try runOnce(w, tag: "run\(r + 1)", fixtures))
                }
            }
            results += Self.summarize(group, measured)
        }
        Console.progress(nil)
        return Self.relateToSyncLimit(results)
    }

    /// One setUp / run / tearDown in a fresh directory that is removed afterwards, even on failure.
    private func runOnce(_ w: any Workload, tag: String, _ fixtures: Fixtures) throws -> RunMeasurement {
        let dir = try directory.makeRunDirectory("\(w.name)-\(w.engine)-\(tag)")
        defer { directory.removeRunDirectory(dir) }
        do {
            try w.setUp(in: dir, fixtures: fixtures)
        } catch {
            try? w.tearDown()
            throw error
        }
        let m: RunMeasurement
        do {
            m = try w.run()
        } catch {
            try? w.tearDown()
            throw error
        }
        try w.tearDown()
        return m
    }

    /// One result per workload; anchors get the ratio subject ÷ anchor when a subject ran the same workload.
    static func summarize(_ group: [any Workload], _ runs: [[RunMeasurement]]) -> [BenchResult] {
        var results = zip(group, runs).map { BenchResult(workload: $0, runs: $1) }
        guard let subject = results.first(where: { $0.role == .subject }) else { return results }
        for k in results.indices where results[k].role == .anchor && results[k].median > 0 {
            results[k].ratio = subject.median / results[k].median
            results[k].ratioOf = "\(subject.engine)/\(results[k].engine)"
        }
        return results
    }

    /// Sets ``BenchResult/ofSyncLimit`` on the results of workloads that compare to the disk's sync rate: their
    /// median over the best median of the `disk` rows of the same workload (`disk-prewritten` unless the noise
    /// says otherwise).
    static func relateToSyncLimit(_ results: [BenchResult]) -> [BenchResult] {
        results.map { r in
            var r = r
            let limit = results.filter { $0.workload == r.workload && $0.engine.hasPrefix("disk") }.map(\.median).max()
            if r.comparesToSyncLimit, let limit, limit > 0 { r.ofSyncLimit = r.median / limit }
            return r
        }
    }
}
