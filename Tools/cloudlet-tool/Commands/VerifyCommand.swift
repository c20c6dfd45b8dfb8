import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum VerifyCommand: Command {
    static let help = """
        USAGE: cloudlet-tool verify --data DIR [--deep] [--json]

        Checks the whole store without opening it: every segment header and frame (CRC32C, LZ4, LSN continuity;
        gaps are legal only inside compacted segments), missing and overlapping segments, every commit payload and
        record, the compaction marker; each partition's index (p*/index: CURRENT, the manifest, every block of every
        live run, the state flushed with them: its compaction generation, its LSN against the log's end) and every
        key directory entry of the flushed state against the frame it points at, then the log after the flush
        replayed onto it (a store of format 3: its checkpoints instead); the catalog's log (catalog/) the same way,
        and that no partition's commits name a catalog version the catalog does not have. Each finding names the
        partition, the segment, run (or other file) and the byte offset. Torn tails and leftovers of an interrupted
        compaction are warnings: the next read-write open cleans them up. The index is derived from the log: a
        damaged one is an error that a read-write open (a damaged run file, CURRENT or manifest) or
        `cloudlet-tool repair` (anything) fixes by rebuilding it.

        When the log is sound, every asset a live record references (list fields included) must be in assets/sha256/;
        with --deep its bytes must also hash to its name. A missing or damaged asset file is an error naming the zone,
        record and field.

        Exit 0 when nothing is wrong (warnings allowed), 65 when anything is. Read-only.

        OPTIONS
          --deep          Also replay the whole log from scratch and compare the result with the flushed index + tail,
                          and hash every referenced asset file.
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(args, valued: Common.valued, flags: Common.flags.union(["--deep"]), help: help)
        let common = try Common(o)
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let started = Date()
        let report = try inspector.verify(deep: o.has("--deep"), progress: Progress.handler)
        Progress.clear()
        // The assets only when the log is sound: checking them opens the store.
        var assets: AssetReport?
        if report.isClean {
            let store = try inspector.openStore()
            defer { try? store.closeNow() }
            assets = try inspector.assets(store: store, deep: o.has("--deep"))
        }
        let clean = report.isClean && assets?.isClean != false
        let seconds = Date().timeIntervalSince(started)
        let totalBytes = report.partitions.reduce(UInt64(0)) { $0 + $1.bytes }
        if common.json {
            var doc = json(report, seconds: seconds)
            if case .object(var members) = doc {
                members["ok"] = .bool(clean)
                members["assets"] = assets.map(json)
                doc = .object(members)
            }
            Out.json(doc)
        } else {
            for f in report.findings { Out.line(describe(f)) }
            for p in assets?.missing ?? [] { Out.line("error: \(describe(p)): the asset file is missing") }
            for p in assets?.corrupt ?? [] { Out.line("error: \(describe(p)): the asset file's bytes do not hash to its name") }
            let errors = report.findings.filter { $0.severity == .error }.count
            let warnings = report.findings.count - errors
            let frames = report.partitions.reduce(0) { $0 + $1.frames }
            let entries = report.partitions.reduce(0) { $0 + $1.entriesChecked }
            let catalog = report.catalog.map { " + catalog (version \($0.lastLSN), \($0.frames) frame(s))" } ?? ""
            let indexes = report.partitions.compactMap(\.indexSummary)
            let index =
                indexes.isEmpty
                ? "" : ", index (p*/index): \(indexes.reduce(0) { $0 + $1.runs }) run(s), \(bytes(indexes.reduce(0) { $0 + $1.bytes }))"
            Out.line(
                "\(clean ? "ok" : "FAILED"): \(report.partitions.count) partition(s)\(catalog), \(frames) frame(s), \(bytes(totalBytes))\(index), \(entries) key directory entries checked\(report.deep ? ", full replay compared" : "") in \(String(format: "%.2f", seconds)) s (\(bytes(UInt64(Double(totalBytes) / max(seconds, 1e-9))))/s); \(errors) error(s), \(warnings) warning(s)"
            )
        }
        if !common.json, let a = assets, a.files > 0 || a.references > 0 {
            Out.line(
                "assets: \(a.references) reference(s) to \(a.referenced) file(s) checked\(a.deep ? " and hashed" : ""), "
                    + "\(a.files) file(s) in the store (\(bytes(UInt64(a.bytes)))); \(a.missing.count) missing, \(a.corrupt.count) damaged")
        }
        return clean ? 0 : 65
    }

    static func describe(_ p: AssetReport.Problem) -> String {
        "zone \(p.zone.canonicalName), record '\(p.recordName)', field '\(p.field)', asset \(p.checksum)"
    }

    static func json(_ a: AssetReport) -> JSONValue {
        func problem(_ p: AssetReport.Problem) -> JSONValue {
            .members([
                "zone": .string(p.zone.canonicalName), "recordName": .string(p.recordName), "field": .string(p.field),
                "checksum": .string(p.checksum),
            ])
        }
        return .members([
            "files": .int(a.files), "bytes": .int(a.bytes), "referenced": .int(a.referenced), "references": .int(a.references),
            "hashed": .bool(a.deep), "missing": .array(a.missing.map(problem)), "damaged": .array(a.corrupt.map(problem)),
        ])
    }

    /// `error: partition 0, segment 00000000000000000001.seg, offset 1234: checksum mismatch …`; a file of the
    /// index is named inside it: `index run index/00000000000000000003.run`.
    static func describe(_ f: VerifyReport.Finding) -> String {
        var file = name(f.file)
        let kind: String
        if Path.name(Path.parent(f.file)) == "index" {
            kind = file.hasSuffix(".run") ? "index run" : file.hasPrefix("MANIFEST-") ? "index manifest" : "index file"
            file = "index/" + file
        } else {
            kind = file.hasSuffix(".seg") ? "segment" : file.hasPrefix("checkpoint-") ? "checkpoint" : file == "index" ? "index" : "file"
        }
        let log = f.partition == VerifyReport.catalogPartition ? "catalog" : "partition \(f.partition)"
        return "\(f.severity.rawValue): \(log), \(kind) \(file)\(f.offset.map { ", offset \($0)" } ?? ""): \(f.message)"
    }

    static func json(_ f: VerifyReport.Finding) -> JSONValue {
        .members([
            "severity": .string(f.severity.rawValue), "partition": .int(f.partition), "file": .string(name(f.file)),
            "path": .string(f.file), "offset": f.offset.map { .int($0) }, "message": .string(f.message),
            "damaged": f.damaged.map { .members([("start", .int($0.lowerBound)), ("end", .int($0.upperBound))]) },
        ])
    }

    static func json(_ r: VerifyReport, seconds: Double) -> JSONValue {
        .members([
            "ok": .bool(r.isClean), "deep": .bool(r.deep), "seconds": .double(seconds),
            "findings": .array(r.findings.map(json)),
            "catalog": r.catalog.map { c in
                .members([
                    ("segments", .int(c.segments)), ("frames", .int(c.frames)), ("bytes", .int(c.bytes)),
                    ("lastLSN", .int(c.lastLSN)), ("mutations", .int(c.mutations)),
                    ("checkpointLSN", c.checkpointLSN.map { .int($0) }),
                ])
            },
            "partitions": .array(
                r.partitions.map { p in
                    .members(
                        [
                            ("index", .int(p.index)), ("segments", .int(p.segments)), ("frames", .int(p.frames)),
                            ("bytes", .int(p.bytes)), ("lastLSN", .int(p.lastLSN)), ("mutations", .int(p.mutations)),
                            ("checkpointLSN", p.checkpointLSN.map { .int($0) }), ("entriesChecked", .int(p.entriesChecked)),
                            ("compactionGeneration", .int(p.compactionGeneration)),
                            ("catalogVersion", p.catalogVersion.map { .int($0) }),
                        ] + indexMembers(p.indexSummary))
                }),
        ])
    }
}
