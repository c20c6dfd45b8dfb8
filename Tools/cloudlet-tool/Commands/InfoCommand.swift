import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum InfoCommand: Command {
    static let help = """
        USAGE: cloudlet-tool info --data DIR [--json]

        Describes a store: format version, partitions, each partition's segments (LSN range, size, epoch,
        compaction generation), compaction marker, index (p*/index: runs per level, bytes, the LSN of the last
        flush, the records and tombstones flushed, and whether opening uses it; a store of format 3: its
        checkpoints instead), LSN range, dead bytes, the catalog (its log, version, schemas and subscriptions, and the catalog version each partition's
        commits were validated against), and its containers, databases and zones with record and tombstone
        counts. Read-only.

        OPTIONS
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(args, valued: Common.valued, flags: Common.flags, help: help)
        let common = try Common(o)
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let info = try inspector.info()
        let assets = try inspector.assetFiles()
        if common.json {
            var doc = json(info)
            if case .object(var members) = doc {
                members["assets"] = .members([("files", .int(assets.files)), ("bytes", .int(assets.bytes))])
                doc = .object(members)
            }
            Out.json(doc)
        } else {
            text(info, path: common.data)
            Out.line("assets (assets/sha256/): \(assets.files) file(s), \(bytes(UInt64(assets.bytes)))")
        }
        if let e = info.openError {
            warn("error: the store does not open (run `cloudlet-tool verify`): \(e)")
            return 65
        }
        return 0
    }

    static func text(_ info: StoreInfo, path: String) {
        let m = info.metadata
        let created = Date(timeIntervalSince1970: Double(m.created) / 1000)
        Out.line("store \(path): format \(m.format), id \(m.storeID), \(m.partitions) partition(s), created \(created)")
        for p in info.partitions {
            let lsns = p.lastLSN.map { "LSNs 1…\($0)" } ?? "LSN range unknown"
            let generation = p.marker.map { "compaction generation \($0.generation) (compacted through LSN \($0.coveredThrough))" } ?? "never compacted"
            Out.line("partition \(p.index) (\(name(p.directory))): \(lsns), \(generation)")
            let size = p.segments.reduce(UInt64(0)) { $0 + $1.size }
            let epochs = Set(p.segments.compactMap(\.epoch)).sorted()
            Out.line("  \(p.segments.count) segment(s), \(bytes(size)), epochs \(epochs.map(String.init).joined(separator: ", "))")
            var rows = [["segment", "LSNs", "size", "epoch", "kind"]]
            for s in p.segments {
                rows.append([
                    s.name, s.lastLSN.map { $0 < s.firstLSN ? "empty (from \(s.firstLSN))" : "\(s.firstLSN)…\($0)" } ?? "\(s.firstLSN)…?",
                    bytes(s.size), s.epoch.map(String.init) ?? "?",
                    s.generation.map { "compacted (generation \($0))" } ?? "regular",
                ])
            }
            table(rows, indent: "    ").forEach(Out.line)
            for l in p.leftovers { Out.line("  leftover of an interrupted compaction: \(name(l))") }
            if let index = p.indexSummary {
                Out.line("  index (\(name(index.directory))/): \(describe(index))\(p.indexUsed == true ? ", used" : "")")
                for l in index.leftovers { Out.line("  leftover in the index (the next read-write open deletes it): \(l)") }
            } else if p.checkpoints.isEmpty {
                Out.line("  no index: opening replays the whole log")
            }
            for c in p.checkpoints {
                var notes: [String] = []
                if let g = c.generation { notes.append("generation \(g)") }
                if c.used { notes.append("used") }
                if let problem = c.problem { notes.append(problem) }
                Out.line("  checkpoint \(c.name): LSN \(c.lsn), \(bytes(c.size))\(notes.isEmpty ? "" : ", " + notes.joined(separator: ", "))")
            }
            if let replayed = p.framesReplayed {
                let after = p.indexUsed == true ? "after the index's flush" : p.checkpoints.contains(where: \.used) ? "after the checkpoint" : "(the whole log)"
                Out.line("  opening replays \(replayed) frame(s) \(after)")
            }
            if let dead = p.deadBytes, let sealed = p.sealedBytes {
                Out.line("  dead bytes in sealed segments: \(bytes(dead)) of \(bytes(sealed)) (\(percent(dead, of: sealed)))")
            }
            if let purged = p.purgedThroughLSN, purged > 0 { Out.line("  tombstones purged through LSN \(purged)") }
            if let deleted = p.deletedZones, deleted > 0 { Out.line("  \(deleted) deleted zone(s) remembered for change feeds") }
        }
        if let c = info.catalog { catalogText(c) }
        let containers = Set(info.zones.map(\.key.container))
        let databases = Set(info.zones.map(\.key.ownerDatabase))
        Out.line("\(info.zones.count) zone(s) in \(databases.count) database(s) of \(containers.count) container(s), \(info.zones.reduce(0) { $0 + $1.records }) record(s)")
        var last: DatabaseID?
        var rows: [[String]] = []
        func flush() {
            table(rows, indent: "    ").forEach(Out.line)
            rows = []
        }
        for z in info.zones {
            if z.key.ownerDatabase != last {
                flush()
                last = z.key.ownerDatabase
                Out.line("  \(z.key.ownerDatabase.container) \(z.key.ownerDatabase.environment.rawValue) \(z.key.ownerDatabase.scope.rawValue) (\(z.key.ownerDatabase.owner))")
            }
            rows.append([z.key.zoneName, "\(z.records) record(s)", "\(z.tombstones) tombstone(s)", "partition \(z.partition)", "created at LSN \(z.createdLSN)"])
        }
        flush()
    }

    static func catalogText(_ c: CatalogInfo) {
        if c.inPartitionZero {
            Out.line("catalog: in partition 0's log (format 1; the next read-write open moves it to \(name(c.directory))/)")
        } else {
            let size = c.segments.reduce(UInt64(0)) { $0 + $1.size }
            Out.line("catalog (\(name(c.directory))/): version \(c.version.map(String.init) ?? "unknown"), \(c.segments.count) segment(s), \(bytes(size))")
            for ck in c.checkpoints {
                let notes = [ck.used ? "used" : nil, ck.problem].compactMap { $0 }
                Out.line("  checkpoint \(ck.name): version \(ck.lsn), \(bytes(ck.size))\(notes.isEmpty ? "" : ", " + notes.joined(separator: ", "))")
            }
            if let replayed = c.framesReplayed { Out.line("  opening replays \(replayed) frame(s) after the checkpoint") }
        }
        if let types = c.recordTypes, let fields = c.fields, let indexed = c.indexedFields, let subs = c.subscriptions {
            Out.line("  \(types) record type(s) in \(c.schemas ?? 0) schema(s), \(fields) field(s), \(indexed) with index flags; \(subs) subscription(s)")
        }
        if !c.partitionVersions.isEmpty {
            Out.line("  catalog version used by partition: " + c.partitionVersions.enumerated().map { "\($0.offset): \($0.element)" }.joined(separator: ", "))
        }
    }

    static func json(_ c: CatalogInfo) -> JSONValue {
        .members([
            "directory": .string(c.directory), "inPartitionZero": .bool(c.inPartitionZero), "version": c.version.map { .int($0) },
            "framesReplayed": c.framesReplayed.map { .int($0) }, "schemas": c.schemas.map { .int($0) },
            "recordTypes": c.recordTypes.map { .int($0) }, "fields": c.fields.map { .int($0) },
            "indexedFields": c.indexedFields.map { .int($0) }, "subscriptions": c.subscriptions.map { .int($0) },
            "partitionVersions": .array(c.partitionVersions.map { .int($0) }),
            "segments": .array(
                c.segments.map { s in
                    .members([
                        "name": .string(s.name), "firstLSN": .int(s.firstLSN), "lastLSN": s.lastLSN.map { .int($0) },
                        "size": .int(s.size), "epoch": s.epoch.map { .int($0) },
                    ])
                }),
            "checkpoints": .array(
                c.checkpoints.map { ck in
                    .members([
                        "name": .string(ck.name), "lsn": .int(ck.lsn), "size": .int(ck.size), "used": .bool(ck.used),
                        "problem": ck.problem.map(JSONValue.string),
                    ])
                }),
        ])
    }

    static func json(_ info: StoreInfo) -> JSONValue {
        .members([
            "format": .int(info.metadata.format), "storeID": .string(info.metadata.storeID),
            "created": .int(info.metadata.created), "openError": info.openError.map(JSONValue.string),
            "logBytes": .int(info.logBytes), "catalog": info.catalog.map(json),
            "partitions": .array(
                info.partitions.map { p in
                    .members(
                        [
                            ("index", .int(p.index)), ("directory", .string(p.directory)), ("lastLSN", p.lastLSN.map { .int($0) }),
                            (
                                "compaction",
                                p.marker.map { .members([("generation", .int($0.generation)), ("coveredThrough", .int($0.coveredThrough))]) }
                            ),
                            (
                                "segments",
                                .array(
                                    p.segments.map { s in
                                        .members([
                                            "name": .string(s.name), "firstLSN": .int(s.firstLSN), "lastLSN": s.lastLSN.map { .int($0) },
                                            "size": .int(s.size), "epoch": s.epoch.map { .int($0) },
                                            "generation": s.generation.map { .int($0) },
                                        ])
                                    })
                            ),
                            ("leftovers", .array(p.leftovers.map { .string(name($0)) })),
                            (
                                "checkpoints",
                                .array(
                                    p.checkpoints.map { c in
                                        .members([
                                            "name": .string(c.name), "lsn": .int(c.lsn), "size": .int(c.size),
                                            "generation": c.generation.map { .int($0) }, "used": .bool(c.used),
                                            "problem": c.problem.map(JSONValue.string),
                                        ])
                                    })
                            ),
                            ("indexUsed", p.indexUsed.map(JSONValue.bool)),
                            ("framesReplayed", p.framesReplayed.map { .int($0) }), ("sealedBytes", p.sealedBytes.map { .int($0) }),
                            ("deadBytes", p.deadBytes.map { .int($0) }), ("purgedThroughLSN", p.purgedThroughLSN.map { .int($0) }),
                            ("deletedZones", p.deletedZones.map { .int($0) }),
                        ] + indexMembers(p.indexSummary))
                }),
            "zones": .array(
                info.zones.map { z in
                    .members(
                        ExportLines.location(z.key) + [
                            ("partition", .int(z.partition)), ("records", .int(z.records)), ("tombstones", .int(z.tombstones)),
                            ("createdLSN", .int(z.createdLSN)), ("lastChangeLSN", .int(z.lastChangeLSN)),
                        ])
                }),
        ])
    }
}
