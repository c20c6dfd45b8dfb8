/// Every workload with its sizes, full and `--quick`, in the order they run.
///
/// A workload is a ``Definition``: a name, a summary, the engine capabilities it needs (nil: it runs on the
/// disk, not on an engine) and a factory. Adding one (`query`, `changefeed`, `compact` when their issues land) is
/// one entry here, its sizes in ``Sizes``, and, if engines need a new operation, a capability in
/// ``EngineCapabilities`` with a protocol refining ``BenchEngine``.
enum WorkloadCatalog {
    struct Sizes: Sendable {
        var appendSyncs: Int
        var seqwriteMiB: Int
        /// `fillseq`, `fillrandom`, `fillrandom-sync`.
        var fillRecords: Int
        var batch = 200
        /// `fillsync` (one writer).
        var fillsyncRecords: Int
        /// `fillsync-concurrent`.
        var concurrentRecords: Int
        var writers = 32
        /// The preloaded store of `readrandom`, `readhot`, `overwrite`.
        var storeRecords: Int
        /// Lookups per run of `readrandom` and `readhot`.
        var reads: Int
        /// Records replaced per run of `overwrite`.
        var overwrites: Int
        /// The preloaded store of `recover-*`.
        var recoverRecords: Int
        /// The store `changefeed` catches up on (issue: 1 M changes from token zero).
        var changefeedRecords: Int = 1_000_000
        /// How long `notify-*` commits at its rate.
        var notifySeconds: Double = 3
        /// `notify-crowded`: the other user's query subscriptions, and the single writes measured.
        var crowdSubscriptions = 10_000
        var crowdWrites = 100
        /// `asset-upload-*` / `asset-download-*`: how many small (1 MB) files, and the size and count of large ones
        /// (issue 15: 100 MB).
        var smallAssets = 64
        var largeAssetBytes = 100_000_000
        var largeAssets = 3
        /// `replicated-fillsync-concurrent`: records per run, over all writers (HTTP, one per request).
        var replicatedRecords = 6_400
        /// `catchup`: the records a replica that lost its store catches up on (issue 14: 1 M).
        var catchupRecords = 1_000_000
        /// `failover`: leader kills (issue 14: at least 20).
        var failoverKills = 20
        /// `replication-lag`: the steady write rate (issue 14: 5 k/s) and how long it lasts.
        var lagRate = 5_000
        var lagSeconds: Double = 10
        /// The records `scale` loads (issue 12: 10 M; `--scale-records`).
        var scaleRecords = 10_000_000
        /// The reads `scale` does in the reopened store (issue 12: 1 M; `--scale-reads`).
        var scaleReads = 1_000_000
        /// The data set of the `query-*` rows and `query-shared` (issue 13: 100 k and 1 M; `--query-records`).
        var queryRecords = 100_000

        static let full = Sizes(
            appendSyncs: 5_000, seqwriteMiB: 256, fillRecords: 100_000, fillsyncRecords: 2_000,
            concurrentRecords: 3_200, storeRecords: 100_000, reads: 1_000_000, overwrites: 50_000,
            recoverRecords: 200_000)
        /// Small enough that `--quick` stays under a minute even while other builds load the disk: syncs are
        /// what slows down first (to ~4 ms each at worst on our VM), and quick does about 6,000 of them.
        static let quick = Sizes(
            appendSyncs: 200, seqwriteMiB: 64, fillRecords: 10_000, fillsyncRecords: 100,
            concurrentRecords: 256, storeRecords: 10_000, reads: 10_000, overwrites: 5_000,
            recoverRecords: 10_000, changefeedRecords: 10_000, notifySeconds: 0.5, crowdSubscriptions: 1_000, crowdWrites: 20,
            smallAssets: 16, largeAssetBytes: 16_000_000, largeAssets: 2, replicatedRecords: 640, catchupRecords: 20_000,
            failoverKills: 3, lagRate: 2_000, lagSeconds: 1, scaleRecords: 50_000, scaleReads: 20_000,
            queryRecords: 10_000)
    }

    struct Definition: Sendable {
        var name: String
        var summary: String
        /// What an engine must offer to run this; nil: a disk workload, run once on `disk`.
        var needs: EngineCapabilities?
        /// Builds the workload for an engine (nil for disk workloads).
        var make: @Sendable (EngineRegistry.Entry?, Sizes) -> any Workload
        /// For `fillsync*`: the number of 4 KiB fdatasync'd writes of the group's `disk` and `disk-prewritten`
        /// rows (the limits), run interleaved with the engines.
        var diskRow: (@Sendable (Sizes) -> Int)? = nil
        /// For a disk workload that is an asset row's anchor: the definition whose group it runs in, accompanying it
        /// (``Workload/accompaniesGroup``) and interleaved with it run by run, so that the disk's own drift between
        /// runs (a factor of two within minutes on our VM) hits the anchor and the asset row alike.
        var joins: String? = nil
    }

    static let definitions: [Definition] = [
        Definition(
            name: "disk-append-sync", summary: "4 KiB appends, fdatasync after each (disk only)", needs: nil,
            make: { _, s in DiskAppendSyncWorkload(appends: s.appendSyncs) }),
        Definition(
            name: "disk-seqwrite", summary: "1 MiB sequential writes, one fdatasync at the end (disk only)", needs: nil,
            make: { _, s in DiskSequentialWorkload(.write, mebibytes: s.seqwriteMiB) }, joins: "asset-upload-large"),
        Definition(
            name: "disk-seqread", summary: "1 MiB sequential reads of a file dropped from the page cache (disk only)",
            needs: nil, make: { _, s in DiskSequentialWorkload(.read, mebibytes: s.seqwriteMiB) }, joins: "asset-download-large"),
        Definition(
            name: "disk-filesync-1m", summary: "1 MB new files, each written, fdatasync'd and renamed (disk only)",
            needs: nil, make: { _, s in DiskFileSyncWorkload(.write, count: s.smallAssets) }, joins: "asset-upload"),
        Definition(
            name: "disk-fileread-1m", summary: "1 MB files dropped from the page cache, each opened and read whole (disk only)",
            needs: nil, make: { _, s in DiskFileSyncWorkload(.read, count: s.smallAssets) }, joins: "asset-download"),
        Definition(
            name: "notify-1k", summary: "commit → websocket notification delay at 1,000 commits/s (cloudlet only)",
            needs: nil, make: { _, s in NotifyLatencyWorkload(rate: 1_000, seconds: s.notifySeconds) }),
        Definition(
            name: "notify-10k", summary: "commit → websocket notification delay at 10,000 commits/s (cloudlet only)",
            needs: nil, make: { _, s in NotifyLatencyWorkload(rate: 10_000, seconds: s.notifySeconds) }),
        Definition(
            name: "notify-crowded",
            summary: "one user's single-write notification delay while another has 10,000 query subscriptions (cloudlet only)",
            needs: nil, make: { _, s in NotifyCrowdedWorkload(crowd: s.crowdSubscriptions, writes: s.crowdWrites) }),
        Definition(
            name: "asset-upload", summary: "1 MB and 100 MB files POSTed to asset upload URLs over HTTP (cloudlet only)",
            needs: nil, make: { _, s in AssetTransferWorkload(direction: .upload, size: 1_000_000, count: s.smallAssets) }),
        Definition(
            name: "asset-upload-large", summary: "", needs: nil,
            make: { _, s in AssetTransferWorkload(direction: .upload, size: s.largeAssetBytes, count: s.largeAssets) }),
        Definition(
            name: "asset-download", summary: "1 MB and 100 MB files from asset download URLs over HTTP (cloudlet only)",
            needs: nil, make: { _, s in AssetTransferWorkload(direction: .download, size: 1_000_000, count: s.smallAssets) }),
        Definition(
            name: "asset-download-large", summary: "", needs: nil,
            make: { _, s in AssetTransferWorkload(direction: .download, size: s.largeAssetBytes, count: s.largeAssets) }),
        Definition(
            name: "fillseq", summary: "save new records in sorted name order, batches of 200, durability os",
            needs: .write,
            make: { e, s in
                FillWorkload(
                    name: "fillseq", engine: e!, count: s.fillRecords, batchSize: s.batch, names: .sequential,
                    durability: .os)
            }),
        Definition(
            name: "fillrandom", summary: "save new records in random name order, batches of 200, durability os",
            needs: .write,
            make: { e, s in
                FillWorkload(
                    name: "fillrandom", engine: e!, count: s.fillRecords, batchSize: s.batch, names: .random,
                    durability: .os)
            }),
        Definition(
            name: "fillrandom-sync", summary: "fillrandom with every batch fsync'd (a durable import)", needs: .write,
            make: { e, s in
                FillWorkload(
                    name: "fillrandom-sync", engine: e!, count: s.fillRecords, batchSize: s.batch, names: .random,
                    durability: .fsync)
            }),
        Definition(
            name: "fillsync", summary: "one thread saves records, one fsync'd commit each", needs: .write,
            make: { e, s in FillSyncWorkload(name: "fillsync", engine: e!, count: s.fillsyncRecords, writers: 1) },
            diskRow: { $0.fillsyncRecords }),
        Definition(
            name: "fillsync-concurrent", summary: "32 threads save records, one fsync'd commit each", needs: .write,
            make: { e, s in
                FillSyncWorkload(name: "fillsync-concurrent", engine: e!, count: s.concurrentRecords, writers: s.writers)
            }, diskRow: { $0.concurrentRecords }),
        Definition(
            name: "overwrite", summary: "replace existing records, random order, batches of 200, durability os",
            needs: [.write, .update],
            make: { e, s in
                OverwriteWorkload(
                    name: "overwrite", engine: e!, storeCount: s.storeRecords, count: s.overwrites, batchSize: s.batch)
            }),
        Definition(
            name: "readrandom", summary: "point lookups by name, uniform, in a reopened store", needs: [.write, .read],
            make: { e, s in
                ReadWorkload(
                    name: "readrandom", engine: e!, storeCount: s.storeRecords, reads: s.reads, distribution: .uniform)
            }),
        Definition(
            name: "changefeed",
            summary: "catch up on a reopened store's changes from the start (token zero), pages of 200",
            needs: [.write, .changefeed],
            make: { e, s in ChangefeedWorkload(engine: e!, storeCount: s.changefeedRecords) }),
        Definition(
            name: "readhot", summary: "point lookups by name, Zipfian s=0.99, in a reopened store",
            needs: [.write, .read],
            make: { e, s in
                ReadWorkload(
                    name: "readhot", engine: e!, storeCount: s.storeRecords, reads: s.reads,
                    distribution: .zipfian(s: 0.99))
            }),
        Definition(
            name: "recover-checkpoint", summary: "open a cleanly closed store + one get; s per 1M records",
            needs: [.write, .read, .recover],
            make: { e, s in
                RecoverWorkload(name: "recover-checkpoint", engine: e!, storeCount: s.recoverRecords, crash: false)
            }),
        Definition(
            name: "recover-crash", summary: "open a crash image (log replay) + one get; s per 1M records",
            needs: [.write, .read, .recover],
            make: { e, s in
                RecoverWorkload(name: "recover-crash", engine: e!, storeCount: s.recoverRecords, crash: true)
            }),
        Definition(
            name: "scale",
            summary: "load 10 M records in batches of 200, reopen, 1 M uniform reads: memory, disk, open time",
            needs: [.write, .read, .recover],
            make: { e, s in ScaleWorkload(engine: e!, records: s.scaleRecords, reads: s.scaleReads, batchSize: s.batch) }),
    ]

    /// One line per workload: name, then summary.
    static func listing(indent: String) -> String {
        let all = definitions.filter { !$0.summary.isEmpty }.map { ($0.name, $0.summary) }
            + QueryWorkload.summaries.filter { $0.name != "readrandom" }.map { ($0.name, $0.summary) }
            + [SharedQueryWorkload.summary]
            + ClientWorkloads.summaries.map { ($0.name, $0.summary) }
            + [(ReplicatedWorkload.listedName, ReplicatedWorkload.summary)] + ClusterRecovery.summaries
        let width = (all.map(\.0.count).max() ?? 0) + 2  // the longest name and two spaces: no name runs into its summary
        return all.map { indent + $0.0.padding(toLength: width, withPad: " ", startingAt: 0) + $0.1 }.joined(separator: "\n")
    }

    /// The workloads to run, grouped by name: every engine's instance of a workload is in the same group. `sizes`:
    /// nil for the full or quick sizes.
    static func groups(
        quick: Bool, sizes: Sizes? = nil, engines: [EngineRegistry.Entry] = EngineRegistry.all
    ) -> [[any Workload]] {
        let s = sizes ?? (quick ? Sizes.quick : Sizes.full)
        var rows = definitions.map { d -> [any Workload] in
            guard let needs = d.needs else { return [d.make(nil, s)] }
            let rows = engines.filter { $0.runs(d.name, needing: needs) }.map { d.make($0, s) }
            guard let diskRow = d.diskRow, !rows.isEmpty else { return rows }
            return rows + [false, true].map { DiskAppendSyncWorkload(appends: diskRow(s), limitOf: d.name, prewritten: $0) }
        }
        // An asset row's disk anchors run in its group, first, interleaved with it.
        for (i, d) in definitions.enumerated() {
            guard let joined = d.joins, let k = definitions.firstIndex(where: { $0.name == joined }) else { continue }
            rows[k] = rows[i] + rows[k]
            rows[i] = []
        }
        // The query workloads bring their own data set (QueryFixtures).
        // So do the client's (an in-process server over loopback, and the raw HTTP anchor).
        // And the cluster's (processes: cloudlet serve --cluster, etcd).
        return (rows + QueryWorkload.groups(quick: quick, records: s.queryRecords, engines: engines)
            + [SharedQueryWorkload.group(quick: quick, records: s.queryRecords, engines: engines)] + ClientWorkloads.groups(quick: quick)
            + [ReplicatedWorkload.group(quick: quick, sizes: s)] + ClusterRecovery.groups(sizes: s))
            .filter { !$0.isEmpty }
    }

}
