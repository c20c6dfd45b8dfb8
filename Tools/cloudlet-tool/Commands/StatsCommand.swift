import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum StatsCommand: Command {
    static let help = """
        USAGE: cloudlet-tool stats --data DIR [--json]

        Space use, like sqlite3_analyzer: per segment its size, live and dead bytes, compression ratio, current
        records and tombstones; per zone its records, tombstones, live and dead bytes and key directory size; per
        partition the totals, the key directory (entries, approximate size decoded), its index on disk (p*/index:
        runs per level, bytes, the LSN of the last flush, the records and tombstones flushed) and what a compaction
        would do (frames dropped, copied, rewritten; bytes before and after). A mutation's share of its frame is live
        while it is current: superseded versions, purged tombstones and records of deleted zones are dead. Read-only.

        OPTIONS
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(args, valued: Common.valued, flags: Common.flags, help: help)
        let common = try Common(o)
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let store = try inspector.openStore()
        defer { try? store.closeNow() }
        let stats = try inspector.spaceStats(store: store, progress: Progress.handler)
        let assets = try inspector.assets(store: store, deep: false)
        Progress.clear()
        if common.json {
            var doc = json(stats)
            if case .object(var members) = doc {
                members["assets"] = .members([
                    ("files", .int(assets.files)), ("bytes", .int(assets.bytes)), ("referenced", .int(assets.referenced)),
                    ("references", .int(assets.references)), ("unreferenced", .int(assets.unreferenced)),
                    ("unreferencedBytes", .int(assets.unreferencedBytes)), ("missing", .int(assets.missing.count)),
                ])
                doc = .object(members)
            }
            Out.json(doc)
        } else {
            text(stats)
            Out.line(
                "assets: \(assets.files) file(s), \(bytes(UInt64(assets.bytes))); \(assets.referenced) referenced by \(assets.references) "
                    + "field value(s); \(assets.unreferenced) unreferenced (\(bytes(UInt64(assets.unreferencedBytes))), for `cloudlet-tool gc`)"
                    + (assets.missing.isEmpty ? "" : "; \(assets.missing.count) reference(s) to missing files"))
        }
        return 0
    }

    static func text(_ s: SpaceStats) {
        for p in s.partitions {
            Out.line(
                "partition \(p.index): \(p.segments) segment(s), \(bytes(p.bytes)); live \(bytes(p.liveBytes)), dead \(bytes(p.deadBytes)) (\(percent(p.deadBytes, of: p.bytes)))"
            )
            Out.line("  records \(p.records), tombstones \(p.tombstones)")
            Out.line(
                "  key directory: \(p.keyDirectoryEntries) entries, ~\(bytes(UInt64(p.keyDirectoryBytes))) decoded; change index: \(p.changeIndexEntries) entries"
            )
            if let index = p.indexSummary { Out.line("  index (\(name(index.directory))/): \(describe(index))") }
            let plan = p.plan
            Out.line(
                "  compaction would read \(plan.framesRead) frame(s): drop \(plan.framesDropped), copy \(plan.framesCopied), rewrite \(plan.framesRewritten); \(bytes(plan.bytesBefore)) → ~\(bytes(plan.bytesAfter)), reclaiming ~\(bytes(plan.bytesReclaimed)) (\(percent(plan.bytesReclaimed, of: plan.bytesBefore)))"
            )
        }
        Out.line("segments:")
        var rows = [["partition", "segment", "LSNs", "size", "live", "dead", "dead %", "frames", "compression", "records", "tombstones"]]
        for g in s.segments {
            rows.append([
                "\(g.partition)", g.name, "\(g.firstLSN)…\(g.lastLSN)", bytes(g.size), bytes(g.liveBytes), bytes(g.deadBytes),
                percent(g.deadBytes, of: g.size), "\(g.frames)", String(format: "%.2fx", g.compressionRatio), "\(g.records)",
                "\(g.tombstones)",
            ])
        }
        table(rows).forEach(Out.line)
        Out.line("zones:")
        rows = [["zone", "records", "tombstones", "live", "dead", "key directory"]]
        for z in s.zones {
            rows.append([
                z.key.canonicalName, "\(z.records)", "\(z.tombstones)", bytes(z.liveBytes), bytes(z.deadBytes),
                "\(z.indexEntries) entries, ~\(bytes(UInt64(z.indexBytes)))",
            ])
        }
        table(rows).forEach(Out.line)
        Out.line("total: \(bytes(s.totalBytes)), dead \(bytes(s.deadBytes)) (\(percent(s.deadBytes, of: s.totalBytes))); after compaction ~\(bytes(s.bytesAfterCompaction))")
        Out.line("catalog: version \(s.catalogVersion), \(s.catalogSegments) segment(s), \(bytes(s.catalogBytes))")
    }

    static func json(_ plan: SpaceStats.Plan) -> JSONValue {
        .members([
            "framesRead": .int(plan.framesRead), "framesDropped": .int(plan.framesDropped),
            "framesCopied": .int(plan.framesCopied), "framesRewritten": .int(plan.framesRewritten),
            "bytesBefore": .int(plan.bytesBefore), "bytesAfter": .int(plan.bytesAfter),
            "bytesReclaimed": .int(plan.bytesReclaimed),
        ])
    }

    static func json(_ s: SpaceStats) -> JSONValue {
        .members([
            "totalBytes": .int(s.totalBytes), "deadBytes": .int(s.deadBytes), "bytesAfterCompaction": .int(s.bytesAfterCompaction),
            "catalog": .members([
                ("version", .int(s.catalogVersion)), ("segments", .int(s.catalogSegments)), ("bytes", .int(s.catalogBytes)),
            ]),
            "partitions": .array(
                s.partitions.map { p in
                    .members(
                        [
                            ("index", .int(p.index)), ("segments", .int(p.segments)), ("bytes", .int(p.bytes)),
                            ("liveBytes", .int(p.liveBytes)), ("deadBytes", .int(p.deadBytes)), ("records", .int(p.records)),
                            ("tombstones", .int(p.tombstones)), ("keyDirectoryEntries", .int(p.keyDirectoryEntries)),
                            ("keyDirectoryBytes", .int(p.keyDirectoryBytes)), ("changeIndexEntries", .int(p.changeIndexEntries)),
                            ("compaction", json(p.plan)),
                        ] + indexMembers(p.indexSummary))
                }),
            "segments": .array(
                s.segments.map { g in
                    .members([
                        "partition": .int(g.partition), "name": .string(g.name), "firstLSN": .int(g.firstLSN),
                        "lastLSN": .int(g.lastLSN), "generation": g.generation.map { .int($0) }, "size": .int(g.size),
                        "frames": .int(g.frames), "liveBytes": .int(g.liveBytes), "deadBytes": .int(g.deadBytes),
                        "payloadBytes": .int(g.payloadBytes), "storedPayloadBytes": .int(g.storedPayloadBytes),
                        "compressionRatio": .double(g.compressionRatio), "records": .int(g.records),
                        "tombstones": .int(g.tombstones), "deadMutations": .int(g.deadMutations),
                    ])
                }),
            "zones": .array(
                s.zones.map { z in
                    .members(
                        ExportLines.location(z.key) + [
                            ("partition", .int(z.partition)), ("records", .int(z.records)), ("tombstones", .int(z.tombstones)),
                            ("liveBytes", .int(z.liveBytes)), ("deadBytes", .int(z.deadBytes)),
                            ("keyDirectoryEntries", .int(z.indexEntries)), ("keyDirectoryBytes", .int(z.indexBytes)),
                            ("changeIndexEntries", .int(z.changeIndexEntries)),
                        ])
                }),
        ])
    }
}
