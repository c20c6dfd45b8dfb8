import Cloudlet
import CloudletCommandLine
import CloudletMaintenance
import CloudletStorage
import CloudletWire
import Foundation

enum GCCommand: Command {
    static let help = """
        USAGE: cloudlet-tool gc --data DIR [--grace SECONDS] [--dry-run] [--json]

        Deletes the asset files (assets/sha256/) that no live record version references — in any zone or database,
        list fields included — and that were last written or uploaded more than the grace window ago (an upload's
        receipt may still be saved until then). `cloudlet serve` does the same online every --asset-gc-interval
        seconds. The store must be stopped (exclusive lock).

        OPTIONS
          --grace SECONDS   Keep unreferenced files younger than this (default 3600, the store's default window).
          --dry-run         Only say what it would delete (read-only; shared lock).
        \(Common.help)
        """

    static func run(_ args: [String]) async throws -> Int32 {
        let o = try CommandLineOptions(
            args, valued: Common.valued.union(["--grace"]), flags: Common.flags.union(["--dry-run"]), help: help)
        let common = try Common(o)
        let grace = Double(try o.integer("--grace", in: 0...(365 * 24 * 3600), "seconds") ?? 3600)
        if o.has("--dry-run") {
            let (lock, inspector) = try common.inspect()
            defer { lock.release() }
            let store = try inspector.openStore()
            defer { try? store.closeNow() }
            let report = try inspector.assets(store: store, deep: false)
            if common.json {
                Out.json(
                    .members([
                        ("dryRun", .bool(true)), ("files", .int(report.files)), ("bytes", .int(report.bytes)),
                        ("referenced", .int(report.referenced)), ("unreferenced", .int(report.unreferenced)),
                        ("unreferencedBytes", .int(report.unreferencedBytes)),
                    ]))
            } else {
                Out.line(
                    "\(report.files) asset file(s), \(bytes(UInt64(report.bytes))); \(report.referenced) referenced; would delete "
                        + "up to \(report.unreferenced) unreferenced file(s), \(bytes(UInt64(report.unreferencedBytes))) (those older than \(Int(grace)) s)")
            }
            return 0
        }
        let (lock, _) = try common.exclusive()
        let store = try CloudletStore(path: common.data, configuration: StoreConfiguration(durability: .fsync), holding: lock)
        let report: AssetCollection
        do { report = try store.collectAssetGarbageNow(gracePeriod: grace) } catch {
            try? store.closeNow()
            throw error
        }
        try store.closeNow()
        if common.json {
            Out.json(
                .members([
                    ("files", .int(report.files)), ("bytes", .int(report.bytes)), ("referenced", .int(report.referenced)),
                    ("deletedFiles", .int(report.deletedFiles)), ("deletedBytes", .int(report.deletedBytes)),
                    ("keptUnreferenced", .int(report.keptUnreferenced)),
                ]))
        } else {
            Out.line(
                "deleted \(report.deletedFiles) of \(report.files) asset file(s), \(bytes(UInt64(report.deletedBytes))) of "
                    + "\(bytes(UInt64(report.bytes))); \(report.referenced) referenced, \(report.keptUnreferenced) unreferenced kept (younger than \(Int(grace)) s)")
        }
        return 0
    }
}
