import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum CompactCommand: Command {
    static let help = """
        USAGE: cloudlet-tool compact --data DIR [--dry-run] [--rate BYTES] [--segment-size BYTES] [--force] [--json]

        Rewrites each partition's log keeping only what is live — current record versions, tombstones inside the
        retention window (older ones are purged first), zone creations and deletions still in force, schema — into
        segments of a new compaction generation, then swaps them in atomically and deletes the old ones. Frames keep
        their LSN and epoch, so change tokens and change tags stay valid. The segment being written is compacted too.
        A crash at any point leaves the old or the new log, never a mix. The store must be stopped (exclusive lock).
        A store that is a cluster node's (it has a CLUSTER file) is compacted only up to the compaction horizon the
        node last stored (the LSN every replica of the partition was known to hold; docs/replication.md,
        "Compaction"), and tombstones are not purged (only the leader purges); --force compacts all of it and purges,
        which writes a frame no other replica has: only for a store taken out of the cluster for good.

        OPTIONS
          --dry-run             Only say what it would do (read-only; shared lock). For a cluster node it plans the
                                whole log, not only what lies below its horizon.
          --rate BYTES          Read at most BYTES per second (e.g. 100M); default: no limit.
          --segment-size BYTES  Size of the segments written (default 64M).
          --force               Compact a cluster node's store past its horizon (see above).
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(["--rate", "--segment-size"]), flags: Common.flags.union(["--dry-run", "--force"]),
            help: help)
        let common = try Common(o)
        // The identity file `cloudlet serve --cluster` writes when a store joins a cluster (ClusterNode.identityFile).
        let isClusterNode = FileManager.default.fileExists(atPath: common.data + "/CLUSTER")
        let segmentSize = try o.int("--segment-size") ?? StoreConfiguration().segmentSize
        if o.has("--dry-run") {
            let (lock, inspector) = try common.inspect()
            defer { lock.release() }
            let store = try inspector.openStore()
            defer { try? store.closeNow() }
            let stats = try inspector.spaceStats(store: store, segmentSize: segmentSize, progress: Progress.handler)
            Progress.clear()
            if common.json {
                Out.json(.members([("dryRun", .bool(true)), ("partitions", .array(stats.partitions.map { .members([("index", .int($0.index))] + (StatsCommand.json($0.plan).objectMembers)) }))]))
            } else {
                for p in stats.partitions {
                    let plan = p.plan
                    Out.line(
                        "partition \(p.index): would read \(plan.framesRead) frame(s) in \(p.segments) segment(s), drop \(plan.framesDropped), copy \(plan.framesCopied), rewrite \(plan.framesRewritten): \(bytes(plan.bytesBefore)) → ~\(bytes(plan.bytesAfter)), reclaiming ~\(bytes(plan.bytesReclaimed)) (\(percent(plan.bytesReclaimed, of: plan.bytesBefore)))"
                    )
                }
            }
            return 0
        }
        let (lock, _) = try common.exclusive()
        var config = StoreConfiguration(durability: .fsync)
        config.compaction = .manual
        config.segmentSize = segmentSize
        config.replicated = isClusterNode && !o.has("--force")
        let store = try CloudletStore(path: common.data, configuration: config, holding: lock)
        let started = Date()
        let reports: [CompactionReport]
        do {
            reports = try await store.compact(
                includeActiveSegment: true, bytesPerSecond: try o.int("--rate") ?? 0,
                progress: { p in Progress.update("compact partition \(p.partition)", done: p.bytesDone, total: p.bytesTotal) })
        } catch {
            try? await store.close()
            throw error
        }
        try await store.close()
        let seconds = Date().timeIntervalSince(started)
        Progress.clear()
        let before = reports.reduce(UInt64(0)) { $0 + $1.bytesBefore }
        if common.json {
            Out.json(
                .members([
                    ("seconds", .double(seconds)), ("bytesBefore", .int(before)),
                    ("bytesAfter", .int(reports.reduce(UInt64(0)) { $0 + $1.bytesAfter })),
                    (
                        "partitions",
                        .array(
                            reports.map { r in
                                .members([
                                    "partition": .int(r.partition), "generation": .int(r.generation),
                                    "segmentsBefore": .int(r.segmentsBefore), "bytesBefore": .int(r.bytesBefore),
                                    "segmentsAfter": .int(r.segmentsAfter), "bytesAfter": .int(r.bytesAfter),
                                    "framesRead": .int(r.framesRead), "framesDropped": .int(r.framesDropped),
                                    "framesCopied": .int(r.framesCopied), "framesRewritten": .int(r.framesRewritten),
                                    "bytesReclaimed": .int(r.bytesReclaimed), "pauseMicroseconds": .int(r.pauseMicroseconds),
                                ])
                            })
                    ),
                ]))
        } else {
            if reports.isEmpty {
                Out.line(
                    config.replicated
                        ? "nothing to compact below this cluster node's stored compaction horizon (docs/replication.md, \"Compaction\")"
                        : "nothing to compact")
            }
            for r in reports {
                Out.line(
                    "partition \(r.partition): \(r.segmentsBefore) segment(s), \(bytes(r.bytesBefore)) → \(r.segmentsAfter) segment(s), \(bytes(r.bytesAfter)) (generation \(r.generation)); reclaimed \(bytes(r.bytesReclaimed)); frames: \(r.framesRead) read, \(r.framesDropped) dropped, \(r.framesCopied) copied, \(r.framesRewritten) rewritten; swap held writers \(String(format: "%.1f", Double(r.pauseMicroseconds) / 1000)) ms"
                )
            }
            Out.line(String(format: "compacted %@ in %.2f s (%@/s)", bytes(before), seconds, bytes(UInt64(Double(before) / max(seconds, 1e-9)))))
        }
        return 0
    }
}

extension JSONValue {
    /// An object's members (sorted by name); none for other values.
    var objectMembers: [(String, JSONValue?)] {
        if case .object(let m) = self { return m.keys.sorted().map { ($0, m[$0]) } }
        return []
    }
}

enum RepairCommand: Command {
    static let help = """
        USAGE: cloudlet-tool repair --data DIR [--drop-range [pN/]SEGMENT:START-END]... [--backup DIR] [--dry-run]
                                   [--rebuild] [--json]

        Repairs a stopped store (exclusive lock): cuts a torn tail, sets aside files of an interrupted compaction,
        each partition's index (p*/index) when it is damaged or stale (and a format-3 store's checkpoints), and
        rebuilds the derived state from the log (a full replay writes a new index). Everything it changes is saved
        first under the backup directory: replaced segments and the old index are moved there, a segment whose tail
        it cuts is copied there.

        Corruption in the middle of the log, or a lost segment file, is never dropped silently: repair reports it,
        suggests the --drop-range that would drop it, and stops (exit 65) unless every such problem is covered by a
        --drop-range. Dropping rewrites the log up to the damaged segment as a new compaction generation, keeping
        every intact frame; the commits in the dropped range are lost (repair names their LSNs).

        OPTIONS
          --drop-range R    Drop bytes START..<END of SEGMENT (a segment file name from verify; pN/ for partition N;
                            for a missing segment file, its name and 0-0). Repeatable.
          --backup DIR      Where to save what repair changes (default DATA/repair-<time>).
          --dry-run         Only say what it would do.
          --rebuild         Rebuild the derived state even if nothing is wrong.
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(["--drop-range", "--backup"]),
            flags: Common.flags.union(["--dry-run", "--rebuild"]), help: help)
        let common = try Common(o)
        var drops: [DropRange] = []
        for spec in o.values("--drop-range") { drops.append(try parseDrop(spec)) }
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let backup = o["--backup"] ?? common.data + "/repair-" + stamp
        let (lock, inspector) = try common.exclusive()
        let report = try await inspector.repair(
            drops: drops, backupDirectory: backup, lock: lock, dryRun: o.has("--dry-run"), rebuild: o.has("--rebuild"),
            progress: Progress.handler)
        Progress.clear()
        let ok = report.refused.isEmpty && (report.after?.isClean ?? true)
        if common.json {
            Out.json(
                .members([
                    "ok": .bool(ok), "dryRun": .bool(o.has("--dry-run")), "actions": .array(report.actions.map(JSONValue.string)),
                    "refused": .array(report.refused.map(VerifyCommand.json)),
                    "suggestions": .array(report.suggestions.map(JSONValue.string)),
                    "backup": report.backupDirectory.map(JSONValue.string),
                    "before": .array(report.before.findings.map(VerifyCommand.json)),
                    "after": report.after.map { .array($0.findings.map(VerifyCommand.json)) },
                ]))
        } else {
            for f in report.before.findings { Out.line("found " + VerifyCommand.describe(f)) }
            if !report.refused.isEmpty {
                Out.line("not repairing: \(report.refused.count) problem(s) need a decision (nothing was changed)")
                for f in report.refused { Out.line("  " + VerifyCommand.describe(f)) }
                if !report.suggestions.isEmpty {
                    Out.line("to drop the damaged data (the commits in it are lost), run again with:")
                    Out.line("  " + report.suggestions.joined(separator: " "))
                }
            } else if report.actions.isEmpty {
                Out.line("nothing to repair")
            } else {
                for a in report.actions { Out.line((o.has("--dry-run") ? "would " : "") + a) }
                if let b = report.backupDirectory, !o.has("--dry-run") { Out.line("saved what was changed under \(b)") }
                for f in report.after?.findings ?? [] { Out.line("after repair: " + VerifyCommand.describe(f)) }
            }
        }
        return ok ? 0 : 65
    }

    /// `[pN/]SEGMENT:START-END`.
    static func parseDrop(_ spec: String) throws -> DropRange {
        var rest = Substring(spec)
        var partition = 0
        if rest.hasPrefix("p"), let slash = rest.firstIndex(of: "/"), let p = Int(rest[rest.index(after: rest.startIndex)..<slash]) {
            partition = p
            rest = rest[rest.index(after: slash)...]
        }
        guard let colon = rest.lastIndex(of: ":"), let dash = rest[colon...].firstIndex(of: "-"),
            let start = UInt64(rest[rest.index(after: colon)..<dash]), let end = UInt64(rest[rest.index(after: dash)...]),
            start <= end
        else { throw UsageError(message: "--drop-range '\(spec)' is not [pN/]SEGMENT:START-END") }
        return DropRange(partition: partition, drop: LogRepair.Drop(segment: String(rest[..<colon]), start: start, end: end))
    }
}
