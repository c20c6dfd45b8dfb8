/// Whether an engine is the one under test or a reference point it is compared with.
enum EngineRole: String, Sendable, Codable {
    /// Cloudlet itself.
    case subject
    /// SQLite, RocksDB, the bare disk: what the subject's numbers are divided by.
    case anchor
}

/// How a workload's result reads in the table. Runs are always measured as operations per second (so that the
/// ratio is "> 1: Cloudlet faster" everywhere); this only chooses how the median is shown.
enum Metric: String, Sendable, Codable {
    /// The median throughput in the workload's `unit`.
    case throughput
    /// Seconds per million operations (1e6 / throughput): for `recover-*`, open time per million records.
    case secondsPerMillion
    /// Seconds per operation (1 / throughput): for `failover`, the time one failover takes.
    case secondsPerOperation
}

/// One benchmark on one engine, in LevelDB `db_bench` style: named, set up on a fresh directory, run, torn down.
///
/// The runner calls `setUp`, `run`, `tearDown` once per run (one warm-up run, then the measured ones; one run only
/// for a ``singleRun`` workload), each time in a new empty directory, so every run starts from the same state.
protocol Workload: AnyObject {
    /// The workload's name, shared by every engine that runs it (`fillrandom`, `disk-append-sync`).
    var name: String { get }
    /// The engine it drives (`sqlite`, `cloudlet`, `disk`).
    var engine: String { get }
    var role: EngineRole { get }
    /// The throughput unit: `records/s`, `syncs/s`, `MB/s`.
    var unit: String { get }
    /// What one latency sample times (`one record commit`, `one 200-record transaction`).
    var latencyOf: String { get }
    /// How the median is shown; default `.throughput`.
    var metric: Metric { get }
    /// Whether the table also shows this throughput as a fraction of the `disk` row of the same group (4 KiB
    /// appends, each fdatasync'd: the one-commit-per-sync limit): true for the `fillsync*` workloads. Default false.
    var comparesToSyncLimit: Bool { get }
    /// Whether `--filter` keeps this workload whenever it keeps another of its group (the `disk` row of
    /// `fillsync*`, which the others are compared with). Default false.
    var accompaniesGroup: Bool { get }
    /// Whether the runner skips the warm-up and runs this once, whatever `--runs` says: for workloads too long
    /// to repeat (`scale`). Default false.
    var singleRun: Bool { get }

    /// Prepares a run in `dir` (an empty directory); nothing here is timed. Preloaded stores come from `fixtures`.
    func setUp(in dir: String, fixtures: Fixtures) throws
    /// Does the measured work.
    func run() throws -> RunMeasurement
    /// Closes whatever `setUp` opened; the runner deletes the directory afterwards.
    func tearDown() throws
}

extension Workload {
    var metric: Metric { .throughput }
    var comparesToSyncLimit: Bool { false }
    var accompaniesGroup: Bool { false }
    var singleRun: Bool { false }
}
