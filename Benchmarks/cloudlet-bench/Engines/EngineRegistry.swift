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
        // ────────────────────────────────────────────────────────────────────────────────────────────────
        // TODO(cloudlet-engine): add the subject here once the embedded `Cloudlet` API compiles:
        //
        //     Entry(name: "cloudlet", role: .subject, detail: { "Cloudlet embedded" }, make: { CloudletEngine() }),
        //
        // with `final class CloudletEngine: BenchEngine` in Engines/CloudletEngine.swift, storing each
        // GeneratedRecord as a Record of type `recordType` named `recordName` with fields title (STRING),
        // count (INT64), score (DOUBLE), created (TIMESTAMP), tags (STRING_LIST), payload (BYTES), in the
        // default zone of one private database. The subject goes first so it runs first in every round.
        // ────────────────────────────────────────────────────────────────────────────────────────────────
        Entry(name: "sqlite", role: .anchor, detail: { SQLiteEngine.detail }, make: { SQLiteEngine() }),
        // The strongest in-process way to write SQLite from many threads: one connection, writers queue on a
        // lock, no busy-handler sleeps. Only where it differs from `sqlite` (with one writer they are the same).
        Entry(
            name: "sqlite-serial", role: .anchor, detail: { SQLiteEngine.sharedDetail },
            make: { SQLiteEngine(sharedConnection: true) }, only: ["fillsync-concurrent"]),
    ]
}
