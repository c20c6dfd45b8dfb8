/// What the workloads that drive a ``BenchEngine`` share: their identity, the engine they opened, and closing it.
/// Subclasses override `setUp` and `run` (and `metric` / `comparesToSyncLimit` / `singleRun` where they differ).
class RecordWorkload: Workload {
    let name: String
    let engine: String
    let role: EngineRole
    let unit: String
    let latencyOf: String
    let entry: EngineRegistry.Entry
    /// The engine `setUp` opened; `tearDown` closes it.
    var opened: (any BenchEngine)?

    init(name: String, engine entry: EngineRegistry.Entry, unit: String = "records/s", latencyOf: String) {
        self.name = name
        self.entry = entry
        engine = entry.name
        role = entry.role
        self.unit = unit
        self.latencyOf = latencyOf
    }

    var metric: Metric { .throughput }
    var comparesToSyncLimit: Bool { false }
    var singleRun: Bool { false }

    func setUp(in dir: String, fixtures: Fixtures) throws {
        preconditionFailure("\(Self.self) must override setUp(in:fixtures:)")
    }

    func run() throws -> RunMeasurement {
        preconditionFailure("\(Self.self) must override run()")
    }

    func tearDown() throws {
        let e = opened
        opened = nil
        try e?.close()
    }

    /// A new engine of this workload's entry, opened on `dir`.
    func open(_ dir: String, _ data: BenchData, _ settings: EngineSettings) throws -> any BenchEngine {
        let e = entry.make()
        try e.open(dir: dir, data: data, settings: settings)
        return e
    }

    /// The engine `setUp` opened; a bug to ask before `setUp`.
    var engineForRun: any BenchEngine {
        guard let opened else { preconditionFailure("\(name) on \(engine): run() without setUp()") }
        return opened
    }
}
