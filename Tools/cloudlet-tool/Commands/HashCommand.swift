import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import Foundation

enum HashCommand: Command {
    static let help = """
        USAGE: cloudlet-tool hash --data DIR [filters] [--tombstones] [--ignore-change-tags] [--json]

        A deterministic SHA-256 of the store's logical content, per zone, database, partition and for the whole
        store: each zone's current records sorted by name (type, name, change tag, created/modified stamps, fields)
        and the set of zones; and of its catalog (schemas with index flags, subscriptions). Two stores with the same content have the same hashes however their logs are laid
        out: before and after compaction, a leader and its replica. The store hash does not depend on the partition
        count. Read-only.

        OPTIONS
          --tombstones          Include current tombstones (name and type).
          --ignore-change-tags  Leave change tags out (to compare a store with an import of its export).
        \(FilterOptions.help)
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(FilterOptions.valued),
            flags: Common.flags.union(["--tombstones", "--ignore-change-tags"]), help: help)
        let common = try Common(o)
        let filter = try FilterOptions.parse(o)
        var options = HashOptions()
        options.includeTombstones = o.has("--tombstones")
        options.ignoreChangeTags = o.has("--ignore-change-tags")
        let (lock, inspector) = try common.inspect()
        defer { lock.release() }
        let store = try inspector.openStore()
        defer { try? store.closeNow() }
        let h = try inspector.hash(store: store, filter: filter, options: options, progress: Progress.handler)
        Progress.clear()
        if common.json {
            Out.json(
                .members([
                    "store": .string(h.store), "records": .int(h.records), "catalog": .string(h.catalog),
                    "partitions": .array(h.partitions.map { .members([("index", .int($0.index)), ("zones", .int($0.zones)), ("records", .int($0.records)), ("hash", .string($0.digest))]) }),
                    "databases": .array(
                        h.databases.map { d in
                            .members([
                                ("container", .string(d.id.container)), ("environment", .string(d.id.environment.rawValue)),
                                ("scope", .string(d.id.scope.rawValue)), ("owner", .string(d.id.owner)), ("zones", .int(d.zones)),
                                ("records", .int(d.records)), ("hash", .string(d.digest)),
                            ])
                        }),
                    "zones": .array(
                        h.zones.map { z in
                            .members(
                                ExportLines.location(z.key) + [
                                    ("partition", .int(z.partition)), ("records", .int(z.records)),
                                    ("tombstones", .int(z.tombstones)), ("hash", .string(z.digest)),
                                ])
                        }),
                ]))
        } else {
            Out.line("store \(h.store) (\(h.records) records)")
            Out.line("catalog \(h.catalog) (schemas and subscriptions)")
            for p in h.partitions { Out.line("partition \(p.index) \(p.digest) (\(p.zones) zones, \(p.records) records)") }
            for d in h.databases {
                Out.line("database \(d.id.container)/\(d.id.environment.rawValue)/\(d.id.scope.rawValue)/\(d.id.owner) \(d.digest) (\(d.zones) zones, \(d.records) records)")
            }
            for z in h.zones { Out.line("zone \(z.key.canonicalName) \(z.digest) (\(z.records) records\(options.includeTombstones ? ", \(z.tombstones) tombstones" : ""))") }
        }
        return 0
    }
}
