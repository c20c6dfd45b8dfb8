/// The summary of one workload on one engine over its measured runs.
struct BenchResult: Sendable {
    var workload: String
    var engine: String
    var role: EngineRole
    var unit: String
    var metric: Metric
    var latencyOf: String
    /// Operations per second of each measured run, in run order.
    var throughputs: [Double]
    /// Operations each run did (in `unit`s × seconds).
    var operationsPerRun: Double
    /// Latency percentiles over the samples of all measured runs pooled, in seconds.
    var p50: Double?
    var p99: Double?
    var latencySamples: Int
    /// For an anchor: the subject's median throughput divided by this one's (> 1: Cloudlet is faster); nil
    /// when no subject ran this workload.
    var ratio: Double?
    /// `cloudlet/sqlite` when `ratio` is set.
    var ratioOf: String?
    /// Whether ``ofSyncLimit`` applies (``Workload/comparesToSyncLimit``).
    var comparesToSyncLimit: Bool
    /// For `fillsync*`: the median throughput divided by `disk-append-sync`'s median (syncs/s) in the same
    /// process run; nil when not applicable or the disk workload did not run. Above 1 only with group commit.
    var ofSyncLimit: Double?
    /// The last measured run's note, if any (`1,001 log frames replayed`).
    var note: String?
    /// The last measured run's `scale` figures (`scale` only).
    var scale: ScaleFigures?

    init(workload: any Workload, runs: [RunMeasurement]) {
        self.workload = workload.name
        engine = workload.engine
        role = workload.role
        unit = workload.unit
        metric = workload.metric
        comparesToSyncLimit = workload.comparesToSyncLimit
        latencyOf = workload.latencyOf
        throughputs = runs.map(\.throughput)
        operationsPerRun = runs.first?.operations ?? 0
        let samples = runs.flatMap(\.latencies).sorted()
        p50 = Statistics.percentile(samples, 50)
        p99 = Statistics.percentile(samples, 99)
        latencySamples = samples.count
        note = runs.last?.note
        scale = runs.last?.scale
    }

    /// Median throughput over the measured runs.
    var median: Double { Statistics.median(throughputs) ?? 0 }

    /// The median as ``metric`` shows it, and its unit.
    var shown: (value: Double, unit: String) {
        switch metric {
        case .throughput: (median, unit)
        case .secondsPerMillion: (median > 0 ? 1e6 / median : 0, "s/1M records")
        case .secondsPerOperation: (median > 0 ? 1 / median : 0, "s each")
        }
    }

    /// (max − min) / median of the runs' throughputs: how noisy the runs were.
    var spread: Double? {
        guard let lo = throughputs.min(), let hi = throughputs.max(), median > 0 else { return nil }
        return (hi - lo) / median
    }
}

extension BenchResult: Encodable {
    private enum Key: String, CodingKey {
        case workload, engine, role, unit, throughputMedian, throughputRuns, operationsPerRun, spread
        case latencyOf, latencyP50Seconds, latencyP99Seconds, latencySamples, ratio, ratioOf
        case metric, shownMedian, shownUnit, ofSyncLimit, note, scale
        case buildConfiguration, debugBuild
    }

    /// Every key is always present (null when unknown), so consumers need not guess.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(workload, forKey: .workload)
        try c.encode(engine, forKey: .engine)
        try c.encode(role, forKey: .role)
        try c.encode(unit, forKey: .unit)
        try c.encode(median, forKey: .throughputMedian)
        try c.encode(throughputs, forKey: .throughputRuns)
        try c.encode(operationsPerRun, forKey: .operationsPerRun)
        try c.encode(spread, forKey: .spread)
        try c.encode(latencyOf, forKey: .latencyOf)
        try c.encode(p50, forKey: .latencyP50Seconds)
        try c.encode(p99, forKey: .latencyP99Seconds)
        try c.encode(latencySamples, forKey: .latencySamples)
        try c.encode(ratio, forKey: .ratio)
        try c.encode(ratioOf, forKey: .ratioOf)
        try c.encode(metric, forKey: .metric)
        try c.encode(shown.value, forKey: .shownMedian)
        try c.encode(shown.unit, forKey: .shownUnit)
        try c.encode(ofSyncLimit, forKey: .ofSyncLimit)
        try c.encode(note, forKey: .note)
        try c.encode(scale, forKey: .scale)
        try c.encode(BuildInfo.configuration, forKey: .buildConfiguration)
        try c.encode(BuildInfo.isDebug, forKey: .debugBuild)
    }
}
