/// Every workload with its sizes, full and `--quick`, in the order they run.
enum WorkloadCatalog {
    struct Sizes {
        var appendSyncs: Int
        var seqwriteMiB: Int
        var fillsyncRecords: Int
        var fillsyncWriters = 32
        var bulkloadRecords: Int
        var bulkloadBatch = 200

        static let full = Sizes(appendSyncs: 5_000, seqwriteMiB: 256, fillsyncRecords: 3_200, bulkloadRecords: 100_000)
        static let quick = Sizes(appendSyncs: 1_000, seqwriteMiB: 64, fillsyncRecords: 640, bulkloadRecords: 20_000)
    }

    /// The names and one-line summaries shown by `--help` and `--list`.
    static let summaries: [(name: String, summary: String)] = [
        ("disk-append-sync", "4 KiB appends, fdatasync after each (disk only)"),
        ("disk-seqwrite", "1 MiB sequential writes, one fdatasync at the end (disk only)"),
        ("fillsync-concurrent", "32 threads save small records, one durable commit each (per engine)"),
        ("bulkload", "one thread saves records in durable transactions of 200 (per engine)"),
    ] + QueryWorkload.summaries

    /// One line per workload: name, then summary.
    static func listing(indent: String) -> String {
        summaries.map { indent + $0.name.padding(toLength: 21, withPad: " ", startingAt: 0) + $0.summary }
            .joined(separator: "\n")
    }

    /// The workloads to run, grouped by name: every engine's instance of a workload is in the same group.
    static func groups(quick: Bool, engines: [EngineRegistry.Entry] = EngineRegistry.all) -> [[any Workload]] {
        let s = quick ? Sizes.quick : Sizes.full
        return ([
            [DiskAppendSyncWorkload(appends: s.appendSyncs)],
            [DiskSequentialWriteWorkload(mebibytes: s.seqwriteMiB)],
            engines.filter { $0.runs("fillsync-concurrent") }.map {
                FillSyncConcurrentWorkload(engine: $0, count: s.fillsyncRecords, writers: s.fillsyncWriters)
            },
            engines.filter { $0.runs("bulkload") }.map {
                BulkLoadWorkload(engine: $0, count: s.bulkloadRecords, batchSize: s.bulkloadBatch)
            },
        ] + QueryWorkload.groups(quick: quick, engines: engines)).filter { !$0.isEmpty }
    }
}
