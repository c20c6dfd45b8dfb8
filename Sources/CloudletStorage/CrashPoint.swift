import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Named places in multi-step disk work where a crash test kills the process on purpose, the way RocksDB's kill
/// points do: a test starts a child with `CLOUDLET_CRASH_AT=<name>` (or `<name>:<n>`, the n-th time it is
/// reached) and the child SIGKILLs itself there, so that every interesting instant of a compaction or a file
/// replacement is hit every run instead of by a lucky timer. Without the variable, ``reached(_:)`` is one load of a
/// constant.
///
/// The points (a new one is a new `case`-like string here and a line in `LogFormat.md`):
/// - `compaction.frame` — after each input frame is copied or dropped;
/// - `compaction.finished` — the new segments are sealed, the marker is not written yet;
/// - `compaction.swapped` — the marker is written and the new segments are in use, the old files are still there;
/// - `compaction.removed` — the old segment files are deleted, the new checkpoint is not written yet;
/// - `replace.synced` — a ``FileReplacement``'s temp file is durable, not renamed yet;
/// - `replace.renamed` — renamed, the directory not fsynced yet;
/// - `lsm.flush.written` — an LSM flush's level-0 run is durable, its manifest edit not appended yet;
/// - `lsm.merge.written` — an LSM merge's output runs are durable, its manifest edit not appended yet;
/// - `notifications.matched` — the notification hub matched durable commits, their notifications are not written
///   to the notification log yet (reopening re-matches them);
/// - `lsm.manifest.appended` — an LSM manifest edit is durable, the tree has not acted on it yet (memtable still
///   held, merge inputs not deleted);
/// - `seed.chunk` — a node seeding its empty store from another's files wrote a chunk of one into its staging
///   directory (docs/replication.md, "Seeding a node from files"), the copy is not complete.
package enum CrashPoint {
    private struct Target {
        var name: String
        var count: Int
    }

    private static let target: Target? = {
        guard let raw = getenv("CLOUDLET_CRASH_AT").map({ String(cString: $0) }), !raw.isEmpty else { return nil }
        let parts = raw.split(separator: ":", maxSplits: 1)
        return Target(name: String(parts[0]), count: parts.count == 2 ? max(1, Int(parts[1]) ?? 1) : 1)
    }()
    private static let hits = Atomic<Int>(0)

    /// Kills the process (SIGKILL, no cleanup, no buffered output) when `name` is the configured point and this is
    /// the configured time it is reached.
    @inline(__always)
    package static func reached(_ name: StaticString) {
        guard let target else { return }
        check(name.description, target)
    }

    private static func check(_ name: String, _ target: Target) {
        guard name == target.name else { return }
        if hits.add(1, ordering: .relaxed).newValue == target.count { kill(getpid(), SIGKILL) }
    }
}
