/// The record engines the workloads run on, in the order they run.
///
/// Every workload that takes an engine runs once per entry here, side by side in the same process run; the
/// table divides the subject's throughput by each anchor's.
enum EngineRegistry {
    struct Entry: Sendable {
        /// Short name for tables, JSON and `--filter` (`sqlite`).
        var name: String
        var role: EngineRole
        /// Version or configuration shown in reports (`SQLite 3.40.1, WAL, synchronous=FULL`).
        var detail: @Sendable () -> String
        /// A new, unopened engine; one per workload.
        var make: @Sendable () -> any BenchEngine
        /// The workloads this entry runs; nil: all of them.
        var only: Set<String>? = nil

        func runs(_ workload: String) -> Bool { only?.contains(workload) ?? true }
    }

    static let all: [Entry] = [
        // The subject goes first so it runs first in every round.
        Entry(name: "cloudlet", role: .subject, detail: { CloudletEngine.detail }, make: { CloudletEngine() }),
        Entry(name: "sqlite", role: .anchor, detail: { SQLiteEngine.detail }, make: { SQLiteEngine() }),
        // The strongest in-process way to write SQLite from many threads: one connection, writers queue on a
        // lock, no busy-handler sleeps. Only where it differs from `sqlite` (with one writer they are the same).
        Entry(
            name: "sqlite-serial", role: .anchor, detail: { SQLiteEngine.sharedDetail },
            make: { SQLiteEngine(sharedConnection: true) }, only: ["fillsync-concurrent"]),
    ]
}
